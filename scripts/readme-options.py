#!/usr/bin/python3
"""Rewrite README.md's Options block from `cellblock-kernel --help`: the
binary named as the first argument (the Makefile passes $(BUILD)'s), else
build/bin/cellblock-kernel.

tests/integration/test_run_cli.py::test_help_is_the_readme_options_block
compares the two; run this (`make readme-options`) after changing an option.
"""
import os
import subprocess
import sys

MARKER = "`cellblock-kernel --help` (a kernelspec's `argv` fixes them):\n\n```\n"


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    kernel = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build", "bin",
                                                               "cellblock-kernel")
    text = subprocess.run([kernel, "--help"], capture_output=True, text=True, check=True).stdout
    path = os.path.join(root, "README.md")
    with open(path) as f:
        md = f.read()
    if MARKER not in md:
        sys.exit("README.md has no Options block marker")
    head, rest = md.split(MARKER, 1)
    _, tail = rest.split("```\n", 1)
    with open(path, "w") as f:
        f.write(head + MARKER + text + "```\n" + tail)


if __name__ == "__main__":
    main()
