"""What the tests share, as one package.

tests/conftest.py puts tests/ on ``sys.path``, so a test module imports
``from support.waiting import wait_until`` wherever it lives, and a worker
subprocess gets the same path from :mod:`support.workers`.  Modules here
never import a test module, and no test module imports another
(tests/test_layout.py checks both).
"""
