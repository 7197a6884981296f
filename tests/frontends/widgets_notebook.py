"""The widget notebook of issue 12: what test_widgets_browser.py runs in the
classic Notebook (cell by cell, as a user does) and has nbconvert execute.

Cell 1 carries one compatibility line for Debian 12's packages: tqdm 4.64's
notebook bar sets its bar's `style` (an ipywidgets >= 7 attribute), which
ipywidgets 6 lacks; without the line `tqdm.notebook` fails there on any
kernel (tests/integration/test_widgets_compare.py shows it on both).
"""

CELLS = [
    # 0: imports
    "import time\n"
    "import ipywidgets as widgets\n"
    "from IPython.display import display\n"
    "from tqdm.notebook import tqdm\n"
    "# Debian 12: tqdm 4.64 sets a progress bar's .style, which ipywidgets 6 lacks\n"
    "if not hasattr(widgets.FloatProgress, 'style'):\n"
    "    import types\n"
    "    widgets.FloatProgress.style = types.SimpleNamespace(bar_color=None)",
    # 1: a slider whose observer prints into an Output widget
    "slider = widgets.IntSlider(value=3, min=0, max=10, description='level')\n"
    "log = widgets.Output()\n"
    "def moved(change):\n"
    "    with log:\n"
    "        print('slider moved to', change['new'])\n"
    "slider.observe(moved, 'value')\n"
    "display(slider, log)",
    # 2: interact
    "@widgets.interact(n=(1, 9))\n"
    "def square(n=4):\n"
    "    print(n, 'squared is', n * n)",
    # 3: a button and its callback
    "button = widgets.Button(description='Click me')\n"
    "clicks = widgets.Label(value='no clicks yet', layout=widgets.Layout(width='160px'))\n"
    "count = 0\n"
    "def clicked(b):\n"
    "    global count\n"
    "    count += 1\n"
    "    clicks.value = 'clicked %d time%s' % (count, '' if count == 1 else 's')\n"
    "button.on_click(clicked)\n"
    "widgets.HBox([button, clicks])",
    # 4: a tqdm.notebook loop
    "for i in tqdm(range(40), desc='crunching'):\n"
    "    time.sleep(0.02)",
    # 5: Python sees what the page did
    "print('slider', slider.value, '| clicks', count)",
    # 6: an interactive matplotlib figure (drawn in the page, over a comm)
    "%matplotlib notebook\n"
    "import matplotlib.pyplot as plt\n"
    "fig, ax = plt.subplots(figsize=(4, 2.5))\n"
    "ax.plot([1, 3, 2, 4], marker='o')\n"
    "ax.set_title('interactive figure')",
]


def notebook(kernel="cellblock", display_name=None, cells=CELLS):
    """The notebook as JSON (nbformat 4.5) on the given kernelspec."""
    return {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": kernel, "language": "python",
                                    "display_name": display_name or kernel},
                     "language_info": {"name": "python"}},
        "cells": [{"cell_type": "code", "id": "cell%d" % i, "metadata": {}, "source": src,
                   "outputs": [], "execution_count": None} for i, src in enumerate(cells)],
    }
