from __future__ import annotations

from mcpx.protocol.ids import opaque_id
from mcpx.records.task import new_task_id


def test_ids_never_start_like_a_command_line_option() -> None:
    # token_urlsafe starts with '-' or '_' one time in 32: 4,000 draws miss that with p < 1e-50.
    ids = [opaque_id(12) for _ in range(2000)] + [new_task_id() for _ in range(2000)]
    assert all(i[0].isalnum() for i in ids)
    assert len(set(ids)) == len(ids)
    assert {len(opaque_id(12)), len(new_task_id())} == {16, 43}
