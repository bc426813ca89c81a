"""A small in-memory stand-in for the Hub's HTTP API: exactly the calls HfApi makes when kbuild
publishes (huggingface_hub 2.4):

    POST /api/repos/create                      POST /api/validate-yaml
    POST /api/<type>s/<repo>/branch/<branch>    GET  /api/<type>s/<repo>/refs
    GET  /api/<type>s/<repo>/tree/<rev>[/<path>]
    GET  /api/<type>s/<repo>/revision/<rev>     POST /api/<type>s/<repo>/preupload/<rev>
    POST /api/<type>s/<repo>/commit/<rev>[?create_pr=1]
    GET|HEAD /<type>s/<repo>/resolve/<rev>/<path>   (file downloads: `kbuild verify`, `api-check`)

Like the Hub, a commit whose `parentCommit` is not the branch head is refused with 412; with
`create_pr=1` it opens a pull request (`refs/pr/<n>`, in `Repo.pulls`) and leaves the branch. Every file
is declared "regular" in preupload, so contents travel inline in the commit (huggingface_hub's
regular-file path; the LFS/Xet transfer is not exercised). `hold_commits(n)` makes the first `n`
commit requests wait for each other, so concurrent uploads are planned against one head and
conflict.
`echo_headers = True` makes every request fail with 400 and the request's headers in the error
message, as a careless or hostile server might answer; `echo_in_commit_oid = True` makes commits
succeed with the request's Authorization header in the `commitOid` they answer; `not_json = True`
answers every request 200 with an HTML page.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from huggingface_hub import CommitOperationAdd, HfApi

REPO = r"(?P<type>[a-z]+)s/(?P<repo>[^/]+/[^/]+)"
ROUTES = [
    ("POST", re.compile(r"^/api/repos/create$"), "create_repo"),
    ("POST", re.compile(r"^/api/validate-yaml$"), "validate_yaml"),
    ("POST", re.compile(rf"^/api/{REPO}/branch/(?P<rev>[^/]+)$"), "create_branch"),
    ("GET", re.compile(rf"^/api/{REPO}/refs$"), "refs"),
    ("GET", re.compile(rf"^/api/{REPO}/tree/(?P<rev>[^/]+)(?:/(?P<path>.+))?$"), "tree"),
    ("GET", re.compile(rf"^/api/{REPO}/revision/(?P<rev>[^/]+)$"), "revision"),
    ("POST", re.compile(rf"^/api/{REPO}/preupload/(?P<rev>[^/]+)$"), "preupload"),
    ("POST", re.compile(rf"^/api/{REPO}/commit/(?P<rev>[^/]+)$"), "commit"),
    ("GET", re.compile(rf"^/{REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"), "resolve"),
    ("HEAD", re.compile(rf"^/{REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"), "resolve"),
]


def blob_oid(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass
class Repo:
    type: str
    branches: dict[str, str] = field(default_factory=dict)  # name -> commit id
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # commit id -> files
    log: list[tuple[str, str]] = field(default_factory=list)  # (branch, summary) per commit
    pulls: dict[str, tuple[str, str]] = field(default_factory=dict)  # refs/pr/<n> -> (target branch, commit)

    def new_commit(self, files: dict[str, bytes], parent: str | None) -> str:
        digest = hashlib.sha1(f"{parent}{len(self.commits)}".encode())
        for path in sorted(files):
            digest.update(path.encode() + blob_oid(files[path]).encode())
        commit = digest.hexdigest()
        self.commits[commit] = files
        return commit

    def files(self, rev: str) -> dict[str, bytes] | None:
        commit = self.branches.get(rev) or self.pulls.get(rev, ("", rev))[1]
        return self.commits.get(commit)


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.lock = threading.Lock()
        self.responses: list[tuple[str, str, int]] = []  # (method, path, status)
        self.authorization: set[str] = set()
        self.echo_headers = False
        self.echo_in_commit_oid = False
        self.not_json = False
        self._barrier: threading.Barrier | None = None
        self._held = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def environment(self, **extra: str) -> dict[str, str]:
        """This process's environment with huggingface_hub pointed here, for a kbuild child process."""
        return {**os.environ, "HF_ENDPOINT": self.endpoint, "HF_HUB_DISABLE_TELEMETRY": "1", **extra}

    def upload_build(self, repo_id: str, variant: Path, branch: str = "v1") -> None:
        """A new kernel repository whose `branch` holds `variant` as build/<variant>/..., uploaded
        with huggingface_hub's real client."""
        api = HfApi(endpoint=self.endpoint, token="hf_fake_token")
        api.create_repo(repo_id, repo_type="kernel")
        api.create_branch(repo_id, branch=branch, repo_type="kernel")
        files = [p for p in variant.rglob("*") if p.is_file()]
        additions = [CommitOperationAdd(f"build/{p.relative_to(variant.parent)}", str(p)) for p in files]
        api.create_commit(repo_id, additions, commit_message=branch, revision=branch, repo_type="kernel")

    def hold_commits(self, count: int) -> None:
        self._barrier = threading.Barrier(count, timeout=30)
        self._held = count

    def files(self, repo_id: str, rev: str) -> dict[str, bytes]:
        return self.repos[repo_id].files(rev) or {}

    def statuses(self, route: str) -> list[int]:
        return [status for method, path, status in self.responses if f"/{route}/" in path or path.endswith(route)]

    # -- handlers: each returns (status, JSON body, extra headers) -------------------------

    def create_repo(self, body: dict, **_) -> tuple:
        repo_id = f"{body['organization']}/{body['name']}"
        url = f"{self.endpoint}/{body.get('type', 'model')}s/{repo_id}"
        with self.lock:
            if repo_id in self.repos:  # the Hub names the existing repository in its 409 answer
                return 409, {"error": "You already created this repo", "url": url}, {}
            repo = Repo(body.get("type", "model"))
            repo.branches["main"] = repo.new_commit(
                {".gitattributes": b"*.so filter=lfs diff=lfs merge=lfs -text\n"}, None
            )
            self.repos[repo_id] = repo
        return 200, {"url": url}, {}

    def validate_yaml(self, body: dict, **_) -> tuple:
        return 200, {"errors": [], "warnings": []}, {}

    def create_branch(self, repo: Repo, rev: str, body: dict, **_) -> tuple:
        with self.lock:
            if rev in repo.branches:
                return 409, {"error": f"Branch {rev} already exists"}, {}
            start = body.get("startingPoint", "main")
            repo.branches[rev] = repo.branches.get(start, start)
        return 200, {}, {}

    def refs(self, repo: Repo, **_) -> tuple:
        branches = [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": c} for n, c in sorted(repo.branches.items())]
        return 200, {"branches": branches, "converts": [], "tags": []}, {}

    def revision(self, repo: Repo, repo_id: str, rev: str, **_) -> tuple:
        commit = repo.branches.get(rev, rev)
        if commit not in repo.commits:
            return 404, {"error": "Invalid rev id"}, {"X-Error-Code": "RevisionNotFound"}
        return 200, {"id": repo_id, "sha": commit, "private": False}, {}

    def tree(self, repo: Repo, rev: str, path: str | None, query: dict, **_) -> tuple:
        files = repo.files(rev)
        if files is None:
            return 404, {"error": "Invalid rev id"}, {"X-Error-Code": "RevisionNotFound"}
        recursive = query.get("recursive", ["False"])[0].lower() == "true"
        prefix = f"{path.rstrip('/')}/" if path else ""
        below = {p: c for p, c in files.items() if p.startswith(prefix)}
        if path and not below:
            return 404, {"error": f"{path} does not exist"}, {"X-Error-Code": "EntryNotFound"}
        entries, folders = [], set()
        for name, content in sorted(below.items()):
            parts = name[len(prefix) :].split("/")
            for depth in range(1, len(parts)):
                folders.add(prefix + "/".join(parts[:depth]))
            if recursive or len(parts) == 1:
                entries.append({"type": "file", "path": name, "size": len(content), "oid": blob_oid(content)})
        for folder in sorted(folders):
            if recursive or "/" not in folder[len(prefix) :]:
                entries.append({"type": "directory", "path": folder, "oid": blob_oid(folder.encode())})
        return 200, entries, {}

    def preupload(self, repo: Repo, rev: str, body: dict, **_) -> tuple:
        files = repo.files(rev) or {}
        answer = []
        for item in body["files"]:
            existing = files.get(item["path"])
            answer.append(
                {
                    "path": item["path"],
                    "uploadMode": "regular",
                    "shouldIgnore": False,
                    "oid": blob_oid(existing) if existing is not None else None,
                }
            )
        return 200, {"files": answer}, {}

    def resolve(self, repo: Repo, rev: str, path: str, **_) -> tuple:
        content = (repo.files(rev) or {}).get(path)
        if content is None:
            return 404, {"error": f"{path} does not exist"}, {"X-Error-Code": "EntryNotFound"}
        headers = {"X-Repo-Commit": repo.branches.get(rev, rev), "ETag": f'"{blob_oid(content)}"'}
        return 200, content, headers

    def commit(self, repo: Repo, repo_id: str, rev: str, lines: list[dict], query: dict, **_) -> tuple:
        if self._barrier is not None and self._held > 0:
            with self.lock:
                self._held -= 1
            self._barrier.wait()
        header = lines[0]["value"]
        with self.lock:
            if rev not in repo.branches:
                return (
                    404,
                    {"error": f"Invalid rev id: {rev}"},
                    {"X-Error-Code": "RevisionNotFound"},
                )
            head = repo.branches[rev]
            if header.get("parentCommit") not in (None, head):
                return (
                    412,
                    {"error": "A commit has happened since. Please refresh and try again."},
                    {},
                )
            files = dict(repo.commits[head])
            for line in lines[1:]:
                value = line["value"]
                if line["key"] == "file":
                    files[value["path"]] = base64.b64decode(value["content"])
                elif line["key"] == "deletedFile":
                    if value["path"] not in files:
                        return (
                            404,
                            {"error": "A file with this name doesn't exist"},
                            {"X-Error-Code": "EntryNotFound"},
                        )
                    del files[value["path"]]
                elif line["key"] == "deletedFolder":
                    files = {p: c for p, c in files.items() if not p.startswith(value["path"].rstrip("/") + "/")}
                else:
                    return 400, {"error": f"unsupported commit line {line['key']}"}, {}
            commit = repo.new_commit(files, head)
            if query.get("create_pr") == ["1"]:  # a pull request against `rev`; the branch stays
                pull = f"refs/pr/{len(repo.pulls) + 1}"
                repo.pulls[pull] = (rev, commit)
                repo.log.append((pull, header["summary"]))
                url = f"{self.endpoint}/{repo.type}s/{repo_id}"
                pull_url = f"{url}/discussions/{len(repo.pulls)}"
                return 200, {"commitUrl": f"{url}/commit/{commit}", "commitOid": commit, "pullRequestUrl": pull_url}, {}
            repo.branches[rev] = commit
            repo.log.append((rev, header["summary"]))
        url = f"{self.endpoint}/{repo.type}s/{repo_id}/commit/{commit}"
        return 200, {"commitUrl": url, "commitOid": commit, "pullRequestUrl": None}, {}

    # -- HTTP plumbing ---------------------------------------------------------------------

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def do_HEAD(self) -> None:
                self._route("HEAD")

            def _route(self, method: str) -> None:
                url = urlparse(self.path)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                hub.authorization.add(self.headers.get("Authorization", ""))
                status, body, headers = 404, {"error": "no such endpoint"}, {}
                for route_method, pattern, name in ROUTES:
                    match = pattern.match(url.path)
                    if hub.echo_headers:
                        status, body = 400, {"error": f"bad request; you sent {dict(self.headers.items())}"}
                    elif match and route_method == method:
                        status, body, headers = self._call(name, match, raw, parse_qs(url.query))
                        if name == "commit" and status == 200 and hub.echo_in_commit_oid:
                            body["commitOid"] = f"leak:{self.headers.get('Authorization')}"
                        break
                hub.responses.append((method, url.path, status))
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                if hub.not_json:
                    status, data = 200, b"<html><body>Service Unavailable</body></html>"
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                if method != "HEAD":
                    self.wfile.write(data)

            def _call(self, name: str, match: re.Match, raw: bytes, query: dict) -> tuple:
                groups = {k: unquote(v) for k, v in match.groupdict().items() if v is not None}
                kwargs: dict = {
                    "query": query,
                    "rev": groups.get("rev"),
                    "path": groups.get("path"),
                }
                if name == "commit":
                    kwargs["lines"] = [json.loads(line) for line in raw.decode().splitlines() if line]
                elif raw:
                    kwargs["body"] = json.loads(raw)
                if "repo" in groups:
                    repo = hub.repos.get(groups["repo"])
                    if repo is None or repo.type != groups["type"]:
                        return (
                            404,
                            {"error": "Repository not found"},
                            {"X-Error-Code": "RepoNotFound"},
                        )
                    kwargs.update(repo=repo, repo_id=groups["repo"])
                kwargs.setdefault("body", {})
                return getattr(hub, name)(**kwargs)

        return Handler
