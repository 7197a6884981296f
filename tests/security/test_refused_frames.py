"""A display the kernel refuses (metadata over its limit, more JSON values
than a frame may carry) must not cost the cell, or its sandbox: the runner
waits for the kernel's ack after every ordered frame, so a refused one is
acked too.  Before that fix the cell hung until --timeout, ignored the
interrupt (the runner defers SIGINT in its own code) and the sandbox was
killed with every variable in it (found by bench/hostile.py's amplification
scenario).  The stock ipykernel runs the same cells as the control: for a
frontend both must simply go on.
"""


CASES = {
    # 2.8 M values: over CB_RUNNER_FRAME_NODES_MAX, refused before parsing
    "too many values": "{'k': [{}] * (8 * 1024 * 1024 // 3 - 100)}",
    # one string of 70 KiB: over CB_FRAME_META_MAX (64 KiB)
    "metadata too large": "{'k': 'm' * (70 * 1024)}",
}


def test_a_refused_display_is_acked_and_the_cell_goes_on(kernel):
    out, err = kernel.run("state = 41")
    assert err is None, out
    for what, metadata in CASES.items():
        out, err = kernel.run(
            "from IPython.display import display\n"
            "display({'text/plain': 'refused?'}, raw=True, metadata=%s)\n"
            "print('after the display')\n" % metadata, timeout=120)
        assert err is None, "%s: %s" % (what, out)
        assert "after the display" in out, (what, out)
    out, err = kernel.run("print(state + 1)")
    assert err is None and "42" in out, "the sandbox lost its state: %r" % out
