"""The official MCP conformance suite judging mcpx as a *client* (of its upstreams), #36.

`run-client.sh` (shared/conformance) runs each client scenario's server and our driver,
tests/conformance/client_driver.py, with its URL: the driver starts `mcpx daemon` with that URL as its
one HTTP upstream and calls through it as an ordinary host, so every check is about what mcpx sends
the scenario server. Both frozen client requirement sets run (each scenario at its revision's wire),
and the two client-credentials extension scenarios by name. The scored result must be every scored
scenario but those tests/conformance/expected-client-failures.txt names (and each one it names must
still fail: a stale line fails the test too).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conformance_suite import installed_suite
from harness import ROOT, UNIT
from shared_folder import SHARED

pytestmark = pytest.mark.conformance  # slow tier (tests/conftest.py)

CONF = ROOT / "tests" / "conformance"
RUNNER = SHARED / "conformance" / "run-client.sh"
DRIVER = CONF / "client_driver.py"
SELECTIONS = {
    "2025-11-25": "2025-11-25",
    "2026-07-28": "2026-07-28",
    "extensions": "scenario:auth/client-credentials-basic,auth/client-credentials-jwt",
}


def _expected(selection: str) -> set[str]:
    out = set()
    for line in (CONF / "expected-client-failures.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and line.split()[0] == selection:
            out.add(line.split()[1])
    return out


def _scored(summary: Path) -> dict[str, bool]:
    """Each scored scenario of the run: passed (no failed check, at least one passed)?"""
    out = {}
    for row in summary.read_text().splitlines()[1:]:
        name, passed, failed, scored = row.split("\t")
        if scored == "yes":
            out[name] = int(failed) == 0 and int(passed) > 0
    return out


@pytest.mark.long
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("selection", SELECTIONS)
def test_mcpx_as_the_client_passes_every_scored_scenario_but_the_listed_ones(tmp_path: Path, selection: str) -> None:
    out = tmp_path / "out"
    # A requirement set starts all its scenarios at once; the driver runs a few at a time (its
    # slots), so each scenario's time limit has to cover the queue before it.
    env = dict(
        os.environ,
        CONFORMANCE_PKG=str(installed_suite()),
        CONFORMANCE_TIMEOUT_MS=str(int(600_000 * UNIT)),
    )
    proc = subprocess.run(
        ["bash", str(RUNNER), str(out), SELECTIONS[selection], "--", sys.executable, str(DRIVER)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1700,
    )
    lines = proc.stdout.strip().splitlines()
    summary = lines[-1] if lines else ""
    print(f"conformance client {selection}: {summary}\n" + "\n".join(lines[:-1]))
    assert proc.returncode in (0, 1) and (out / "summary.tsv").exists(), (
        f"the suite could not run: {proc.stderr[-3000:]}"
    )
    scored = _scored(out / "summary.tsv")
    expected = _expected(selection)
    unexpected = sorted(name for name, ok in scored.items() if not ok and name not in expected)
    stale = sorted(name for name in expected if scored.get(name))
    missing = sorted(expected - set(scored))
    assert not unexpected, f"{selection}: {summary}; failed and not expected: {unexpected} (see {out}/run.log)"
    assert not stale, f"{selection}: passes now, take it off expected-client-failures.txt: {stale}"
    assert not missing, f"{selection}: listed as expected to fail but not run: {missing}"
    passed = sum(scored.values())
    assert summary == f"{passed}/{len(scored)} scored scenarios passed", summary
    assert passed == len(scored) - len(expected), summary
