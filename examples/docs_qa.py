"""Question answering over the project's own docs/ folder: ingest it, then ask.

Two agents share one Chroma collection and one deterministic local embedding (feature hashing,
no model download), so the example runs anywhere; the answering model is scripted:

* ``docs_ingest`` chunks each document, embeds the chunks and upserts them (runs keyed by the
  document's path);
* ``docs_qa`` is a ReAct agent that retrieves the passages nearest to the question and puts them
  into its prompt. The scripted model answers from whichever document ranked first.

With a Chroma server (``scripts/chroma.sh start``; ``CHROMA_URL=http://127.0.0.1:8000``)::

    python -m flink_agents.flink.ingestion_job jobs/docs_ingest.yaml --documents docs
    flink-agents run jobs/docs_qa.yaml
"""

from __future__ import annotations

from flink_agents.agents import IngestionAgent, ReActAgent, RetrievalSettings
from flink_agents.api import (
    ChatMessage,
    ChatModelSetup,
    EmbeddingModelSetup,
    Prompt,
    ResourceDescriptor,
    ResourceType,
)
from flink_agents.providers import (
    ChromaVectorStore,
    HashingEmbeddingModelConnection,
    ScriptedChatModelConnection,
)

DIMENSIONS = 512
EMBEDDING_CONNECTION = ResourceDescriptor.of(HashingEmbeddingModelConnection, dimensions=DIMENSIONS)
EMBEDDING_MODEL = ResourceDescriptor.of(EmbeddingModelSetup, dimensions=DIMENSIONS, batch_size=32)
VECTOR_STORE = ResourceDescriptor.of(
    ChromaVectorStore, collection="project-docs", url={"env": "CHROMA_URL"}, dimensions=DIMENSIONS
)

PROMPT = Prompt(
    messages=[
        ChatMessage(role="system", content="You answer questions about flink-agents-py."),
        ChatMessage(role="user", content="Passages:\n{context}\n\nQuestion: {question}"),
    ]
)

# The scripted model answers from the document of the first passage ([1]).
SCRIPT = [
    {
        "match": r"\[1\] \(source: docs/durable-execution\.md\)",
        "content": "A recorded call is handed back on replay, never made again "
        "(docs/durable-execution.md).",
    },
    {
        "match": r"\[1\] \(source: docs/yaml\.md\)",
        "content": "Declare the prompt under prompts: with {placeholders} (docs/yaml.md).",
    },
    {
        "match": r"\[1\] \(source: docs/state-store\.md\)",
        "content": "The action-state store is a Kafka topic (docs/state-store.md).",
    },
    {"content": "The documentation does not answer that."},
]


def build_ingest_agent() -> IngestionAgent:
    """The agent that puts docs/ into the vector store."""
    return IngestionAgent(
        name="docs_ingest",
        embedding_connection=EMBEDDING_CONNECTION,
        embedding_model=EMBEDDING_MODEL,
        vector_store=VECTOR_STORE,
        max_chars=800,
    )


def build_qa_agent() -> ReActAgent:
    """The agent that answers from the retrieved passages."""
    agent = ReActAgent(
        name="docs_qa",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="scripted", model="scripted-1"),
        prompt=PROMPT,
        retrieval=RetrievalSettings(
            embedding_model="embedding_model",
            vector_store="vector_store",
            top_k=3,
            query_field="question",
        ),
    )
    agent.add_resource(
        "scripted",
        ResourceType.CHAT_MODEL_CONNECTION,
        ScriptedChatModelConnection,
        name="docs_qa",
        turns=SCRIPT,
    )
    agent.add_resource(
        "embedding_connection", ResourceType.EMBEDDING_MODEL_CONNECTION, EMBEDDING_CONNECTION
    )
    agent.add_resource(
        "embedding_model",
        ResourceType.EMBEDDING_MODEL,
        EMBEDDING_MODEL.model_copy(
            update={
                "arguments": {**EMBEDDING_MODEL.arguments, "connection": "embedding_connection"}
            }
        ),
    )
    agent.add_resource("vector_store", ResourceType.VECTOR_STORE, VECTOR_STORE)
    return agent
