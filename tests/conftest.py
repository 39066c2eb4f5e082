import os
import shutil

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HAVE_CHROMIUM = shutil.which("chromium") is not None or os.path.exists("/usr/bin/chromium")


def pytest_collection_modifyitems(config, items):
    if HAVE_CHROMIUM:
        return
    skip = pytest.mark.skip(reason="Chromium is not installed (apt-get install chromium)")
    for item in items:
        if "chromium" in item.keywords:
            item.add_marker(skip)
