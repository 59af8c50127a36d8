"""The workload, measured on students who agree: NPFORMER_WORKLOG records each check's time and verdict,
and `npformer course workload` turns the logs into minutes per exercise beside the rule's estimate."""

import json
import subprocess
import sys

import numpy as np

from npformer.course import check, worklog


def _log(path, *entries):
    path.write_text("".join(json.dumps({"time": t, "exercise": name, "status": status}) + "\n"
                            for t, name, status in entries))
    return path


def test_a_check_appends_its_time_and_verdict_only_when_asked(tmp_path, monkeypatch):
    log = tmp_path / "work.jsonl"
    monkeypatch.delenv(worklog.ENV, raising=False)
    check("relu_backward", lambda x, dout: dout * (x > 0), strict=False)
    assert not log.exists()
    monkeypatch.setenv(worklog.ENV, str(log))
    check("relu_backward", lambda x, dout: dout, strict=False)
    check("relu_backward", lambda x, dout: dout * (x > 0))
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["exercise"], e["status"]) for e in entries] == [("relu_backward", "failed"), ("relu_backward", "passed")]
    assert set(entries[0]) == {"time", "exercise", "status"}, "no code and no output in the log"


def test_minutes_go_to_the_check_they_lead_to_and_a_break_is_capped(tmp_path):
    minute = 60.0
    log = _log(tmp_path / "ada.jsonl",
               (0, "linear_backward", "not implemented"), (5, "relu_backward", "not implemented"),
               (12 * minute, "linear_backward", "wrong"), (20 * minute, "linear_backward", "passed"),
               (20 * minute + 600 * minute, "relu_backward", "passed"),   # a night in between
               (20 * minute + 605 * minute, "relu_backward", "passed"))
    spent = worklog.minutes_to_pass(worklog.read(log))
    assert np.isclose(spent["linear_backward"], 20 * minute / 60 - 5 / 60)
    assert np.isclose(spent["relu_backward"], 5 / 60 + worklog.IDLE_MINUTES)


def test_the_command_prints_the_median_beside_the_estimate(tmp_path):
    logs = [_log(tmp_path / f"{who}.jsonl", (0, "relu_backward", "not implemented"),
                 (minutes * 60, "relu_backward", "passed")) for who, minutes in (("a", 4), ("b", 10), ("c", 6))]
    (tmp_path / "c.jsonl").write_text((tmp_path / "c.jsonl").read_text() + "not json\n")
    result = subprocess.run([sys.executable, "-m", "npformer", "course", "workload", str(logs[0]), "--logs",
                             str(logs[1]), str(logs[2])], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "| `relu_backward` | 3 | 6 | 16 |" in result.stdout and "measured / estimated" in result.stdout
    missing = subprocess.run([sys.executable, "-m", "npformer", "course", "workload", str(tmp_path / "none")],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "no such file" in missing.stderr
