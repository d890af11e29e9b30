"""What goes in: the pinned distributions, which of them are read from source, and the
held-out units (everything else is training data), plus the folders never read."""

from __future__ import annotations

import re

from diffusion_infill.model.training.corpus.packages_v3 import V3_PACKAGES

# Mostly pure-Python distributions, pinned for reproducibility. The licence is read from
# each archive's metadata at build time; copyleft ones are listed on purpose so that the
# data card records them as dropped.
PACKAGES: dict[str, str] = {
    # v1 (2024-10): held-out units and the original training packages
    "requests": "2.32.3",
    "urllib3": "2.2.3",
    "idna": "3.10",
    "click": "8.1.7",
    "flask": "3.0.3",
    "werkzeug": "3.0.6",
    "jinja2": "3.1.4",
    "itsdangerous": "2.2.0",
    "attrs": "24.2.0",
    "packaging": "24.1",
    "pyparsing": "3.1.4",
    "python-dateutil": "2.9.0.post0",
    "six": "1.16.0",
    "pygments": "2.18.0",
    "rich": "13.9.2",
    "typer": "0.12.5",
    "httpx": "0.27.2",
    "httpcore": "1.0.6",
    "anyio": "4.6.2.post1",
    "h11": "0.14.0",
    "toolz": "1.0.0",
    "more-itertools": "10.5.0",
    "boltons": "24.0.0",
    "setuptools": "75.1.0",
    "wheel": "0.44.0",
    "isort": "5.13.2",
    "pyflakes": "3.2.0",
    "pycodestyle": "2.12.1",
    "jedi": "0.19.1",
    "parso": "0.8.4",
    "django": "5.1.2",
    "sphinx": "8.0.2",
    "babel": "2.16.0",
    "networkx": "3.4.2",
    "sympy": "1.13.3",
    "pytest": "8.3.3",
    "pluggy": "1.5.0",
    "marshmallow": "3.23.0",
    "arrow": "1.3.0",
    "tomlkit": "0.13.2",
    "cachetools": "5.5.0",
    "tenacity": "9.0.0",
    "bottle": "0.13.2",
    "fsspec": "2024.10.0",
    "starlette": "0.41.0",
    "fastapi": "0.115.2",
    "decorator": "5.1.1",
    "pexpect": "4.9.0",
    "prompt-toolkit": "3.0.48",
    "traitlets": "5.14.3",
    "numpy": "2.1.2",
    "pandas": "2.2.3",
    "sqlalchemy": "2.0.35",
    "pydantic": "2.9.2",
    "tornado": "6.4.1",
    "twisted": "24.7.0",
    "scikit-learn": "1.5.2",
    "matplotlib": "3.9.2",
    "alembic": "1.13.3",
    "mypy": "1.13.0",
    "celery": "5.4.0",
    "kombu": "5.4.2",
    "scrapy": "2.11.2",
    "nltk": "3.9.1",
    "aiohttp": "3.10.10",
    # v2: scientific stack
    "scipy": "1.14.1",
    "statsmodels": "0.14.4",
    "astropy": "6.1.4",
    "xarray": "2024.10.0",
    "dask": "2024.10.0",
    "distributed": "2024.10.0",
    "bokeh": "3.6.0",
    "scikit-image": "0.24.0",
    "pyarrow": "17.0.0",
    "numba": "0.60.0",
    "pyomo": "6.8.0",
    # v2: machine learning
    "transformers": "4.46.1",
    "datasets": "3.0.2",
    "accelerate": "1.0.1",
    "jax": "0.4.35",
    "flax": "0.10.0",
    "optax": "0.2.3",
    "keras": "3.6.0",
    "mlflow": "2.17.1",
    # v2: web, network, services
    "gunicorn": "23.0.0",
    "uvicorn": "0.32.0",
    "websockets": "13.1",
    "aiofiles": "24.1.0",
    "trio": "0.27.0",
    "pyramid": "2.0.2",
    "falcon": "3.1.3",
    "sanic": "24.6.0",
    "djangorestframework": "3.15.2",
    "wagtail": "6.2.2",
    "graphene": "3.3",
    "zope-interface": "7.1.1",
    "google-auth": "2.35.0",
    "oauthlib": "3.2.2",
    "pyjwt": "2.9.0",
    "redis": "5.2.0",
    "pymongo": "4.10.1",
    "peewee": "3.17.7",
    "sqlparse": "0.5.1",
    "sqlglot": "25.27.0",
    "beautifulsoup4": "4.12.3",
    "html5lib": "1.1",
    "botocore": "1.35.50",
    "boto3": "1.35.50",
    "s3transfer": "0.10.3",
    "moto": "5.0.18",
    "docker": "7.1.0",
    "sentry-sdk": "2.17.0",
    "cryptography": "43.0.3",
    "pyyaml": "6.0.2",
    "jsonschema": "4.23.0",
    "markdown": "3.7",
    "mkdocs": "1.6.1",
    "pendulum": "3.0.0",
    "pillow": "11.0.0",
    "openpyxl": "3.1.5",
    "xlsxwriter": "3.2.0",
    "psutil": "6.1.0",
    # v2: tooling, packaging, testing
    "pip": "24.2",
    "poetry-core": "1.9.1",
    "black": "24.10.0",
    "coverage": "7.6.4",
    "tox": "4.23.2",
    "virtualenv": "20.27.0",
    "nox": "2024.10.9",
    "invoke": "2.2.0",
    "fabric": "3.2.2",
    "cython": "3.0.11",
    "typing-extensions": "4.12.2",
    "factory-boy": "3.3.1",
    "pytest-asyncio": "0.24.0",
    "pytest-mock": "3.14.0",
    "pytest-xdist": "3.6.1",
    # v2: notebooks and applications
    "ipython": "8.28.0",
    "ipykernel": "6.29.5",
    "ipywidgets": "8.1.5",
    "jupyter-client": "8.6.3",
    "jupyter-core": "5.7.2",
    "jupyter-server": "2.14.2",
    "nbformat": "5.10.4",
    "nbconvert": "7.16.4",
    "luigi": "3.5.2",
    "apache-airflow": "2.10.2",
    "prefect": "3.0.10",
    "dvc": "3.56.0",
    # copyleft or weak copyleft: fetched so the card records them, then dropped
    "tqdm": "4.66.5",
    "hypothesis": "6.115.5",
    "certifi": "2024.8.30",
    "paramiko": "3.5.0",
    "pylint": "3.3.1",
    "docutils": "0.21.2",
    "psycopg": "3.2.3",
}

# Fetched as source distributions: their wheels leave the tests out, the sdists ship them.
# Held-out units stay on their wheels, so valid/test hold the same code as in v1.
SDISTS = frozenset(
    {
        "urllib3",
        "idna",
        "flask",
        "werkzeug",
        "jinja2",
        "packaging",
        "pyparsing",
        "six",
        "pygments",
        "typer",
        "httpx",
        "httpcore",
        "anyio",
        "boltons",
        "wheel",
        "isort",
        "pycodestyle",
        "django",
        "sphinx",
        "babel",
        "pytest",
        "pluggy",
        "marshmallow",
        "arrow",
        "tomlkit",
        "cachetools",
        "tenacity",
        "bottle",
        "starlette",
        "fastapi",
        "decorator",
        "pexpect",
        "prompt-toolkit",
        "sqlalchemy",
        "pydantic",
        "alembic",
        "celery",
        "kombu",
        "scrapy",
        "aiohttp",
        "gunicorn",
        "uvicorn",
        "websockets",
        "pyramid",
        "falcon",
        "sanic",
        "djangorestframework",
        "google-auth",
        "oauthlib",
        "redis",
        "pymongo",
        "peewee",
        "sqlparse",
        "sqlglot",
        "markdown",
        "pillow",
        "coverage",
        "tox",
        "virtualenv",
        "nox",
        "invoke",
        "fabric",
        "typing-extensions",
        "factory-boy",
        "pytest-asyncio",
        "pytest-mock",
        "pytest-xdist",
        "luigi",
    }
)

# Held-out units. Everything else is training data.
TEST_UNITS = frozenset(
    {"click", "attrs", "more-itertools", "requests", "stdlib/json", "stdlib/email"}
)
VALID_UNITS = frozenset({"itsdangerous", "h11", "toolz", "stdlib/csv", "stdlib/argparse"})
# Import names of the held-out distributions: a folder of that name inside another unit is
# a copy of held-out code (vendored under a name SKIP_DIRS does not know) and is dropped.
HELD_OUT_PACKAGES = frozenset(
    {"click", "attr", "attrs", "more_itertools", "requests", "itsdangerous", "h11", "toolz", "tlz"}
)

# Standard-library folders that are not hand-written library code worth learning from.
# Lib/test is included (as the unit "stdlib/test"), less the tests of held-out modules.
STDLIB_SKIP = frozenset(
    {
        "encodings",
        "pydoc_data",
        "site-packages",
        "lib-dynload",
        "idlelib",
        "turtledemo",
        "__pycache__",
        "ensurepip",
        "lib2to3",
        "tkinter",
    }
)

# Folders holding vendored copies of other projects, skipped anywhere in an archive (they
# would also leak a held-out package into training through the package that vendors it).
SKIP_DIRS = frozenset(
    {
        "_vendor",
        "vendor",
        "_vendored",
        "vendored",
        "extern",
        "_extern",
        "externals",
        "third_party",
        "_third_party",
        "thirdparty",
        "node_modules",
        "site-packages",
        "__pycache__",
    }
)

SPLITS = ("test", "valid", "train")  # processing order: held-out files win dedupe


def canonical(name: str) -> str:
    """PEP 503 name: lower case, runs of -_. as one -."""
    return re.sub(r"[-_.]+", "-", name).lower()


def split_of(unit: str) -> str:
    """The split a unit's files go to: "test", "valid" or "train"."""
    if unit in TEST_UNITS:
        return "test"
    if unit in VALID_UNITS:
        return "valid"
    return "train"


# v3: more training distributions (packages_v3.py); the held-out units are unchanged.
PACKAGES.update(V3_PACKAGES)
