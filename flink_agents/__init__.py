"""flink-agents-py: LLM agents as keyed Apache Flink jobs, with durable calls."""
