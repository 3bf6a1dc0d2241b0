"""The tests' shared helpers: clusters and lanes, objects, backends, clients, certificates.

Every test imports them one way, ``from tests.kit.<module> import ...`` (pytest's
``pythonpath`` setting puts the checkout on ``sys.path``)."""
