"""pip-audit over requirements.lock, with a verdict that cannot pass silently.

Fails on any known vulnerability not listed in IGNORED (each with its reason in
docs/security.md). When the vulnerability service cannot be reached (pip-audit then skips
every package as "not found"), it says so loudly and exits 0, unless
IRIS_PIP_AUDIT_REQUIRED=1, when that is a failure too. Usage:
    .venv/bin/python .ci/audit_dependencies.py
"""

from __future__ import annotations

import json
import os
import subprocess  # nosec B404 - runs pip-audit with a fixed argv
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIP_AUDIT = Path(sys.executable).with_name("pip-audit")
# Vulnerability ids accepted for now, each explained in docs/security.md.
IGNORED: dict[str, str] = {}


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "pip-audit.json"
        command = [
            str(PIP_AUDIT),
            "--requirement",
            str(ROOT / "requirements.lock"),
            # Every line is an exact pin: audit those versions, install nothing.
            "--no-deps",
            "--disable-pip",
            "--progress-spinner",
            "off",
            "--format",
            "json",
            "--output",
            str(report),
            *(arg for vuln in IGNORED for arg in ("--ignore-vuln", vuln)),
        ]
        run = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603  # nosec B603 - fixed argv, no shell
        if not report.exists():
            print(run.stderr[-3000:])
            print("pip-audit: FAILED to run (see above)")
            return 1
        dependencies = json.loads(report.read_text())["dependencies"]

    audited = [d for d in dependencies if "skip_reason" not in d]
    skipped = [d["name"] for d in dependencies if "skip_reason" in d]
    vulnerable = [
        f"{d['name']} {d['version']}: {', '.join(v['id'] for v in d['vulns'])}"
        for d in audited
        if d.get("vulns")
    ]
    if vulnerable:
        print("pip-audit: known vulnerabilities:\n  " + "\n  ".join(vulnerable))
        return 1
    if not audited:
        print(
            f"pip-audit: NOT AUDITED. The vulnerability service was not reachable; all "
            f"{len(skipped)} pinned packages were skipped (docs/security.md)."
        )
        return 1 if os.environ.get("IRIS_PIP_AUDIT_REQUIRED") == "1" else 0
    print(f"pip-audit: {len(audited)} packages audited, no known vulnerabilities")
    if skipped:
        print(f"pip-audit: {len(skipped)} not found by the service: {', '.join(skipped)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
