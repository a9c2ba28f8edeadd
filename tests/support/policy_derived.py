"""What ``admin_cull`` derives from nova's and cinder's policy, asked of their own virtualenv.

The library's tests run in a virtualenv without nova or cinder; their policy
defaults import only in the services' virtualenv (:mod:`tests.support.openstack`).
:func:`derivation` runs ``tenancy-mw-manage cull derive`` there, with this
checkout of the library first on the path, as an operator runs it with the
service's Python.
"""

from __future__ import annotations

import configparser
import functools
import io
import json
import os
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def _derive(venv: Path, service: str, output: str, extra: tuple[str, ...] = ()) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONWARNINGS="ignore")
    command = [str(venv / "bin" / "python"), "-m", "tenancy_mw.manage", "cull", "derive", "--namespace", service]
    done = subprocess.run(
        [*command, "--format", output, *extra], capture_output=True, text=True, timeout=300, env=env, cwd=str(venv)
    )
    if done.returncode:
        raise RuntimeError("tenancy-mw-manage cull derive --namespace %s failed:\n%s" % (service, done.stderr[-3000:]))
    return done.stdout


def derivation(venv: Path, service: str, *extra: str) -> dict:
    """The derivation's JSON (``--format json``): ``rules``, ``decisions`` (each with ``culled``), ``overridden``.

    *extra* are more arguments for the verb (``--policy-file``, ``--member-call``).
    """
    return json.loads(_derive(venv, service, "json", extra))


def derived_rules(venv: Path, service: str, *extra: str) -> list[str]:
    """The rule lines ``admin_cull`` derives for *service* (``--format rules``); *extra* as for :func:`derivation`."""
    return [line for line in _derive(venv, service, "rules", extra).splitlines() if line.strip()]


def report(venv: Path, service: str) -> str:
    """The printed report (``--format report``), as ``doc/admin_cull.rst`` shows nova's."""
    return _derive(venv, service, "report")


def with_derived_rules(paste_text: str, venv: Path) -> str:
    """*paste_text* with each ``admin_cull`` section's ``policy_namespace`` replaced by the rules it derives.

    Its ``policy_member_calls`` are declared to the derivation, and left out.

    So the filter loads in a Python without the service installed and culls
    what it would cull in the service's.
    """
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # keep the keys' case
    parser.read_string(paste_text)
    for section in parser.sections():
        if parser.has_option(section, "policy_namespace"):
            declared = [line.strip() for line in parser.get(section, "policy_member_calls", fallback="").splitlines()]
            member_calls = tuple(arg for line in declared if line for arg in ("--member-call", line))
            derived = derived_rules(venv, parser.get(section, "policy_namespace"), *member_calls)
            own = parser.get(section, "rules", fallback="").splitlines()
            parser.remove_option(section, "policy_namespace")
            parser.remove_option(section, "policy_member_calls")
            parser.set(section, "rules", "\n".join(line for line in [*own, *derived] if line.strip()))
    out = io.StringIO()
    parser.write(out)
    return out.getvalue()
