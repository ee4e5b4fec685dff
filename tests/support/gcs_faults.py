"""GCS fault scenarios shared by the storage, local-engine and Beam-engine tests."""

from __future__ import annotations

from tfpipe.testing.gcs import FaultRule, LocalGCS


def lose_commit_reply(local_gcs: LocalGCS) -> FaultRule:
    """The next create-only upload (ifGenerationMatch=0: a shard's commit) lands, but its reply
    is lost (503): the retry meets the precondition (412) and must find its own bytes there."""
    return local_gcs.inject_faults(
        503, count=1, methods=("POST",), path_contains="ifGenerationMatch=0", route="plain", lose_reply=True
    )
