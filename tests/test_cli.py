"""The npformer command."""

import subprocess
import sys


from npformer import cli, gradcheck, ops


def test_gradcheck_command_prints_every_op_passing(capsys):
    assert cli.main(["gradcheck"]) == 0
    output = capsys.readouterr().out
    for name in gradcheck.OP_CASES:
        assert name in output
    assert "all passed" in output and "FAIL" not in output


def test_gradcheck_command_can_pick_ops_and_list_them(capsys):
    assert cli.main(["gradcheck", "--op", "linear", "--op", "softmax"]) == 0
    output = capsys.readouterr().out
    assert "linear" in output and "softmax" in output and "attention" not in output
    assert cli.main(["gradcheck", "--list"]) == 0
    assert capsys.readouterr().out.split() == list(gradcheck.OP_CASES)


def test_gradcheck_command_exits_1_when_a_backward_is_wrong(monkeypatch, capsys):
    def broken_case(rng):
        forward, _, inputs = gradcheck.linear_case(rng)
        return forward, lambda dy, cache: tuple(2 * g for g in ops.linear_backward(dy, cache)), inputs

    monkeypatch.setitem(gradcheck.OP_CASES, "linear", broken_case)
    assert cli.main(["gradcheck", "--op", "linear"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_gradcheck_command_rejects_an_unknown_op(capsys):
    assert cli.main(["gradcheck", "--op", "conv2d"]) == 2
    assert "unknown op conv2d" in capsys.readouterr().err


def test_python_dash_m_and_help():
    result = subprocess.run([sys.executable, "-m", "npformer", "gradcheck", "--help"],
                            capture_output=True, text=True)
    assert result.returncode == 0 and "finite differences" in result.stdout
    result = subprocess.run([sys.executable, "-m", "npformer"], capture_output=True, text=True)
    assert result.returncode == 2 and "gradcheck" in result.stderr


def test_gradcheck_model_prints_every_parameter_tensor(monkeypatch, capsys):
    smaller = {**gradcheck.TINY_MODEL, "d_model": 4, "d_ff": 6, "n_layers": 1}
    monkeypatch.setattr(gradcheck, "TINY_MODEL", smaller)
    assert cli.main(["gradcheck", "--model", "--norm", "pre", "--tie-embeddings"]) == 0
    output = capsys.readouterr().out
    for key in ("src_embed.W", "encoder.layers.0.self_attn.q.W", "decoder.layers.0.cross_attn.v.b",
                "decoder.norm.gamma", "out_proj.b"):
        assert key in output
    assert "out_proj.W" not in output and "all passed" in output and "norm=pre" in output
