"""Runs in every kernel the docs build starts (`--IPKernelApp.exec_files`): counts the matplotlib
figures each cell makes, by execution count, in `_nbagent_docs_figures`.

docs/_hooks/notebooks.py reads the count after the last cell and fails the build when a cell that
made a figure shows no image on its page (a `plt.show()` under a backend that draws nothing, a
figure that is made and never displayed). The file runs in the notebook's namespace, so it leaves
one name there and imports nothing into it.
"""

_nbagent_docs_figures: dict[int, int] = {}


def _nbagent_watch_figures() -> None:
    import matplotlib.figure
    from IPython import get_ipython

    made = [0]
    original = matplotlib.figure.Figure.__init__

    def counting_init(self: object, *args: object, **kwargs: object) -> None:
        made[0] += 1
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    def before(_info: object) -> None:
        made[0] = 0

    def after(result: object) -> None:
        count = getattr(result, "execution_count", None)
        if made[0] and count is not None:
            _nbagent_docs_figures[count] = made[0]

    matplotlib.figure.Figure.__init__ = counting_init  # type: ignore[method-assign]
    shell = get_ipython()
    shell.events.register("pre_run_cell", before)
    shell.events.register("post_run_cell", after)


_nbagent_watch_figures()
del _nbagent_watch_figures
