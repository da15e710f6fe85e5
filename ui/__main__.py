import gc

gc.disable()  # while the modules load (see rag.cli.started)

from rag.cli import started  # noqa: E402
from rag.embed import preload  # noqa: E402
from rag.settings import Settings  # noqa: E402

preload(Settings().embed)  # the model opens while the page's modules import

from ui.app import launch  # noqa: E402

started()
launch()
