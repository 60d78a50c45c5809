"""The test and benchmark harness: a local MinIO server, the runtime as a child process with its
demo job, one polling helper, and `make demo`.

Not part of the product: the wheel and the images do not ship it (setup.py packages only
sparkpoint/). It imports as the top-level `harness` from a checkout: pytest's `pythonpath = ["."]`,
`python -m harness.demo` from the checkout root, and the dev virtualenv's `sparkpoint-checkout.pth`
(written by `make venv`) for scripts such as bench/*.py and e2e/chaos.py.
"""
