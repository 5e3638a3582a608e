"""Recovery markers as the Flink operator keeps them, for the store tests."""

from flink_agents.durable.store import PartitionMark, RecoveryMarker


def low_only(marker: RecoveryMarker) -> RecoveryMarker:
    """The compact form the Flink operator keeps in keyed state: low offsets, no open runs."""
    partitions = {p: PartitionMark(low=m.low, end=m.low) for p, m in marker.partitions.items()}
    return marker.model_copy(update={"partitions": partitions, "open_runs": []})
