"""The probe contract (DESIGN.md), written once here instead of in every script.

A probe script (``envmgr/probes/scripts/<id>.py``) uses only the standard library and
what it probes (torch, flashinfer, ...), never envmgr, and defines::

    PROBE = "<id>"
    def probe(args: dict) -> dict:   # {"status": pass|fail|skip|error, "summary": str, "details": {...}}

The runner sends ``script source + WRAPPER`` to the environment's own interpreter as
``python -c SOURCE ARGS_JSON`` (nothing is copied onto the target). The wrapper times
the call, turns an exception into ``error`` and prints one marked JSON line, so other
output of the libraries cannot be mistaken for the result.
"""

from __future__ import annotations

MARKER = "ENVMGR_PROBE_RESULT "
STATUSES = ("pass", "fail", "skip", "error")

WRAPPER = '''

def _envmgr_main():
    import json, sys, time, traceback
    started = time.monotonic()
    try:
        args = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
        result = dict(probe(args))
    except BaseException as exc:  # the contract: any failure is a result, not a crash
        result = {"status": "error", "summary": f"{type(exc).__name__}: {exc}",
                  "details": {"traceback": traceback.format_exc()[-4000:]}}
    result.setdefault("details", {})
    result.setdefault("summary", "")
    out = {"probe": PROBE, **result, "duration_s": round(time.monotonic() - started, 3)}
    sys.stdout.flush()
    print("''' + MARKER + '''" + json.dumps(out, default=str), flush=True)


if __name__ == "__main__":
    _envmgr_main()
'''
