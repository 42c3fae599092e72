"""The notebooks here are opened by tests/test_browser.py in a real browser; nbval must not collect them."""

collect_ignore_glob = ["*.ipynb"]
