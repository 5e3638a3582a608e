"""Chat model providers, one module each.

* :mod:`.openai_compatible` -- the OpenAI chat-completions protocol (OpenAI, vLLM, llama.cpp...);
* :mod:`.anthropic` -- the Anthropic Messages API;
* :mod:`.ollama` -- a local Ollama server;
* :mod:`.gemini` -- Google Gemini's native API (extra ``gemini``);
* :mod:`.bedrock` -- AWS Bedrock's Converse API (extra ``bedrock``);
* :mod:`.scripted` -- deterministic replies, for tests and examples.

Nothing is imported here: each provider's SDK is an optional extra (``pip install
'flink-agents-py[providers]'``, ``[gemini]``, ``[bedrock]``), and a missing one is named when its
module is imported.
"""
