"""Root conftest: perfsuite's own tests drive the plugin through pytest's ``pytester``."""

pytest_plugins = ["pytester"]
