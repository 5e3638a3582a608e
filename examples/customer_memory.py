"""A support agent that remembers each customer across tickets (long-term memory, docs/memory.md).

Runs are keyed by customer. For every ticket the agent searches the customer's ``facts`` memory
set for what earlier tickets said, shows the model those facts with the ticket, and remembers
the ticket. The second ticket's answer uses a fact from the first::

    {"customer": "ada", "text": "My router is an XR-500 and the wifi keeps dropping."}
    {"customer": "ada", "text": "Which firmware should I install on my router?"}
    -> "For your XR-500: install firmware 2.4 ..." (the XR-500 was only in the first ticket)

The embedding is the deterministic local one (feature hashing) and the model is scripted, so the
example runs anywhere: ``run_local`` (below), or as a job with the Kafka store
(``flink-agents run jobs/customer_memory.yaml``).
"""

from __future__ import annotations

from typing import cast

from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    EmbeddingModelSetup,
    InputEvent,
    LongTermMemorySetup,
    MemoryCompaction,
    MemoryExtraction,
    MemoryHit,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.providers import (
    HashingEmbeddingModelConnection,
    ScriptedChatModelConnection,
)

DIMENSIONS = 256
NO_FACTS = "(nothing remembered yet)"

# The scripted model answers the firmware question from a remembered router model, and asks
# for the model when nothing tells it.
SCRIPT = [
    {"match": r"XR-500[\s\S]*firmware", "content": "For your XR-500: install firmware 2.4."},
    {"match": r"firmware", "content": "Which router model do you have?"},
    {"content": "Thanks, noted. We are looking into it."},
]


def format_facts(hits: list[MemoryHit]) -> str:
    """Remembered facts as prompt lines, nearest first."""
    return "\n".join(f"- {hit.text}" for hit in hits) or NO_FACTS


@action(InputEvent)
async def answer_ticket(event: InputEvent, ctx: RunnerContext) -> None:
    """Answer a ticket with what earlier tickets of the customer said, then remember it."""
    ticket = str(event.input["text"])
    facts = ctx.long_term_memory["facts"]
    remembered = await facts.search(ticket, k=3)
    model = cast(ChatModelSetup, ctx.get_resource("chat_model", ResourceType.CHAT_MODEL))
    messages = [
        ChatMessage(role="system", content="You answer support tickets."),
        ChatMessage(
            role="user",
            content=f"What we know about this customer:\n{format_facts(remembered)}\n\n"
            f"Ticket: {ticket}",
        ),
    ]
    reply = await ctx.durable_execute_async(
        model.chat, messages, call_id="chat", result_type=ChatMessage
    )
    await facts.add(ticket, metadata={"source": "ticket"})
    ctx.send_event(
        OutputEvent(
            output={
                "customer": event.input["customer"],
                "answer": reply.content,
                "remembered": [hit.text for hit in remembered],
            }
        )
    )


def with_memory(
    agent: Agent,
    dimensions: int = DIMENSIONS,
    max_items: int | None = None,
    store: ResourceDescriptor | None = None,
    extraction: MemoryExtraction | None = None,
    compaction: MemoryCompaction | None = None,
) -> Agent:
    """``agent`` with the local hashing embedding (``embedding_model``) and the long-term memory
    set ``facts`` over it, holding at most ``max_items`` items per key: in the key's state, or
    with ``store`` (a vector store's descriptor, declared as ``memory_store``: Chroma) in a
    namespace per key of that store (and remembering through ``extraction``'s chat model,
    compacted with ``compaction``'s)."""
    agent.add_resource(
        "embedding_connection",
        ResourceType.EMBEDDING_MODEL_CONNECTION,
        ResourceDescriptor.of(HashingEmbeddingModelConnection, dimensions=dimensions),
    )
    agent.add_resource(
        "embedding_model",
        ResourceType.EMBEDDING_MODEL,
        ResourceDescriptor.of(
            EmbeddingModelSetup, connection="embedding_connection", dimensions=dimensions
        ),
    )
    backend: dict[str, str] = {}
    if store is not None:
        agent.add_resource("memory_store", ResourceType.VECTOR_STORE, store)
        backend = {"backend": "vector_store", "vector_store": "memory_store"}
    agent.add_resource(
        "facts",
        ResourceType.LONG_TERM_MEMORY,
        ResourceDescriptor.of(
            LongTermMemorySetup,
            embedding_model="embedding_model",
            **backend,
            **({} if max_items is None else {"max_items": max_items}),
            **({} if extraction is None else {"extraction": extraction}),
            **({} if compaction is None else {"compaction": compaction}),
        ),
    )
    return agent


def build_agent(model: type[ScriptedChatModelConnection] = ScriptedChatModelConnection) -> Agent:
    """The customer-memory agent (``model``: the scripted connection's class, which a test
    replaces by one that records what the model is shown)."""
    agent = with_memory(Agent(name="customer_memory"))
    agent.add_resource(
        "scripted",
        ResourceType.CHAT_MODEL_CONNECTION,
        ResourceDescriptor.of(model, name="customer_memory", turns=SCRIPT),
    )
    agent.add_resource(
        "chat_model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor.of(ChatModelSetup, connection="scripted", model="scripted-1"),
    )
    agent.add_action(answer_ticket)
    return agent


if __name__ == "__main__":
    from flink_agents.runtime import run_local

    tickets = [
        {"customer": "ada", "text": "My router is an XR-500 and the wifi keeps dropping."},
        {"customer": "bob", "text": "Which firmware should I install on my router?"},
        {"customer": "ada", "text": "Which firmware should I install on my router?"},
    ]
    for result in run_local(build_agent(), tickets, key="customer"):
        print(*result.output_values)
