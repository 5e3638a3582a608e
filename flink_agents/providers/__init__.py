"""Chat model providers, one module each.

* :mod:`.openai_compatible` -- the OpenAI chat-completions protocol (OpenAI, vLLM, llama.cpp...);
* :mod:`.azure_openai` -- Azure OpenAI's chat completions (deployments, api-version, Entra ID);
* :mod:`.openai_responses` -- the OpenAI Responses API, used statelessly;
* :mod:`.vllm` -- a vLLM server: chat completions with its defaults and quirks explained;
* :mod:`.anthropic` -- the Anthropic Messages API;
* :mod:`.ollama` -- a local Ollama server;
* :mod:`.gemini` -- Google Gemini's native API (extra ``gemini``);
* :mod:`.bedrock` -- AWS Bedrock's Converse API (extra ``bedrock``);
* :mod:`.scripted` -- deterministic replies, for tests and examples.

Nothing is imported here: each provider's SDK is an optional extra (``pip install
'flink-agents-py[providers]'``, ``[gemini]``, ``[bedrock]``), and a missing one is named when its
module is imported.
"""
