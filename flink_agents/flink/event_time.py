"""Event time after the agent operator: outputs stamped with their input's timestamp, and
watermarks made again from those stamps (docs/pipelines.md, "Event time").

An agent's runs end in processing time, seconds after their input and in another order than
the inputs came: the operator cannot pass its input's watermarks on as they are, since an
output may still come for an input older than the watermark. It writes each input's timestamp
on its outputs' envelopes instead, and :func:`output_watermarks` stamps the outputs with it and
lets the watermark follow the largest stamp seen, ``lag_ms`` behind. The final watermark of a
bounded input passes once every key's runs have ended.
"""

from __future__ import annotations

from pyflink.common import Duration, WatermarkStrategy

from flink_agents.flink.operator import OutputTimestamps


def output_watermarks(lag_ms: int | None) -> WatermarkStrategy:
    """The timestamps and watermarks of the agent operator's outputs.

    ``lag_ms`` None: outputs keep the timestamp Flink gave them (none for the end of input's)
    and no watermark is made but the final one. Otherwise each output gets its input's event
    time and the watermark trails the largest output timestamp by ``lag_ms``: an output later
    than that is late for the windows after the agent.
    """
    if lag_ms is None:
        return WatermarkStrategy.no_watermarks().with_timestamp_assigner(OutputTimestamps())
    if lag_ms < 0:
        raise ValueError(f"event_time_lag_ms must be 0 or more, not {lag_ms}")
    return WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(lag_ms)
    ).with_timestamp_assigner(OutputTimestamps(event_time=True))
