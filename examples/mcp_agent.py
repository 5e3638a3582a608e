"""A ReAct agent whose tool and system prompt come from an MCP server (examples/mcp_server.py).

The server runs as a subprocess over stdio; the model is the scripted one, so the example runs
offline. Run it from the repository root (the server script is named by a relative path, as in
examples/mcp_agent.yaml, so both forms compile to the same plan). Each input is a distance in
miles; the model calls the server's ``convert`` tool, which it is offered as ``units__convert``,
and answers with the result::

    echo '{"id": 1, "miles": "26.2"}' > miles.jsonl
    flink-agents run --local examples.mcp_agent:build_agent --input miles.jsonl --key id
"""

from __future__ import annotations

from flink_agents.agents import ReActAgent
from flink_agents.api import ChatModelSetup, Prompt, ResourceDescriptor, ResourceType
from flink_agents.providers import ScriptedChatModelConnection
from flink_agents.providers.mcp import PYTHON_COMMAND, McpPrompt, McpServer

SERVER_SCRIPT = "examples/mcp_server.py"  # relative to the working directory, as in the YAML

# Turn 1 converts the input ($input, the user message), turn 2 answers with the tool's result.
SCRIPT = [
    {
        "tool_calls": [
            {
                "name": "units__convert",
                "arguments": {"value": "$input", "from_unit": "mi", "to_unit": "km"},
            }
        ]
    },
    {"content": "$last"},
]


def build_agent() -> ReActAgent:
    """The unit-conversion agent."""
    agent = ReActAgent(
        name="mcp_units",
        chat_model=ResourceDescriptor.of(
            ChatModelSetup,
            connection="scripted",
            model="scripted-1",
            prompt="assistant",  # the MCP server's prompt, as the system prompt
            tools=["units"],  # every tool of the MCP server resource 'units'
        ),
        prompt=Prompt(text="{miles}"),
        max_tool_rounds=2,
    )
    agent.add_resource(
        "units",
        ResourceType.TOOL,
        McpServer,
        namespace="units",
        # The worker's own interpreter (sys.executable), which has the mcp SDK the server needs.
        transport={"type": "stdio", "command": PYTHON_COMMAND, "args": [SERVER_SCRIPT]},
        timeout_seconds=20,
    )
    agent.add_resource(
        "assistant",
        ResourceType.PROMPT,
        McpPrompt,
        server="units",
        prompt="assistant",
        arguments={"style": "brief"},
    )
    agent.add_resource(
        "scripted",
        ResourceType.CHAT_MODEL_CONNECTION,
        ScriptedChatModelConnection,
        name="mcp_units",
        turns=SCRIPT,
    )
    return agent
