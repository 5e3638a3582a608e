"""docker/k8s/: the FlinkDeployment manifests against the Flink Kubernetes Operator's own CRD.

The schema is the openAPIV3Schema of the FlinkDeployment CRD in the operator's API jar from Maven
Central (scripts/operator-crd.sh fetches it; the version is pinned in scripts/versions.sh). The
API server prunes fields a structural schema does not declare, and ``kubectl apply`` (strict
field validation) refuses them: so here an object with declared properties accepts no others,
unless the schema says ``x-kubernetes-preserve-unknown-fields``. A typo in a field name fails.
"""

from __future__ import annotations

import copy
import re
import subprocess
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
MANIFESTS = sorted((REPO / "docker" / "k8s").glob("*.yaml"))
CRD = "META-INF/fabric8/flinkdeployments.flink.apache.org-v1.yml"
"""The CRD in the jar (``-v1``: an apiextensions.k8s.io/v1 CustomResourceDefinition)."""
OUTDATED_FLINK_VERSION = ("spec", "flinkVersion")
"""The one field the pinned operator cannot accept: its flinkVersion enum ends at v1_20, while the
image runs Flink 2.3 (``v2_3``). No release of the operator's API jar that knows Flink 2 is on
Maven Central (1.3.0, 1.7.0 and 1.10.0 are); docs/deployment.md says which operator to install."""


@cache
def operator_schema() -> dict[str, Any]:
    """The FlinkDeployment openAPIV3Schema of the pinned operator, closed as the API server
    applies it (:func:`closed`)."""
    jar = subprocess.run(
        ["bash", str(REPO / "scripts" / "operator-crd.sh"), "fetch"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    with zipfile.ZipFile(jar) as archive:
        crd = yaml.load(archive.read(CRD), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    [version] = [v for v in crd["spec"]["versions"] if v["served"] and v["storage"]]
    schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
    # Every resource has these; the API server adds them to a CRD's schema itself.
    schema["properties"] |= {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
    }
    return closed(schema)


def closed(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every object that declares properties refusing undeclared ones."""
    schema = copy.deepcopy(schema)
    pending = [schema]
    while pending:
        node = pending.pop()
        if (
            "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
        pending += list(node.get("properties", {}).values())
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                pending.append(node[key])
        for key in ("allOf", "anyOf", "oneOf"):
            pending += node.get(key, [])
    return schema


def violations(deployment: dict[str, Any]) -> dict[tuple[str | int, ...], str]:
    """Where ``deployment`` breaks the operator's schema: path -> message."""
    validator = jsonschema.Draft7Validator(operator_schema())
    return {
        tuple(error.absolute_path): error.message for error in validator.iter_errors(deployment)
    }


def flink_deployments(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "FlinkDeployment"]


@pytest.fixture
def support_desk() -> dict[str, Any]:
    [deployment] = flink_deployments(REPO / "docker" / "k8s" / "support-desk.yaml")
    return deployment


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_each_flink_deployment_fits_the_operators_crd(manifest: Path) -> None:
    deployments = flink_deployments(manifest)
    assert deployments, f"{manifest.name} holds no FlinkDeployment"
    for deployment in deployments:
        assert deployment["apiVersion"] == "flink.apache.org/v1beta1"
        found = violations(deployment)
        assert found.keys() == {OUTDATED_FLINK_VERSION}, found
        assert deployment["spec"]["flinkVersion"] == "v2_3"


def test_a_field_name_with_a_typo_is_refused(support_desk: dict[str, Any]) -> None:
    support_desk["spec"]["taskManger"] = support_desk["spec"].pop("taskManager")
    nested = support_desk["spec"]["job"]
    nested["paralelism"] = nested.pop("parallelism")
    found = violations(support_desk)
    assert ("spec",) in found and "'taskManger' was unexpected" in found[("spec",)]
    assert "'paralelism' was unexpected" in found[("spec", "job")]


def test_a_value_of_the_wrong_kind_is_refused(support_desk: dict[str, Any]) -> None:
    support_desk["spec"]["job"]["upgradeMode"] = "last_state"
    support_desk["spec"]["flinkConfiguration"]["taskmanager.numberOfTaskSlots"] = 2
    found = violations(support_desk)
    assert "'last_state' is not one of" in found[("spec", "job", "upgradeMode")]
    slots = ("spec", "flinkConfiguration", "taskmanager.numberOfTaskSlots")
    assert found[slots] == "2 is not of type 'string'"


def test_the_manifests_name_the_image_make_image_builds(support_desk: dict[str, Any]) -> None:
    built = re.search(r"image=\$\{IMAGE:-([^}]+)\}", (REPO / "scripts" / "image.sh").read_text())
    assert built is not None
    spec = support_desk["spec"]
    sidecars = spec["taskManager"]["podTemplate"]["spec"]["containers"]
    assert {spec["image"], *(c["image"] for c in sidecars)} == {built.group(1)}
    flink = re.search(r'"apache-flink==([\d.]+)"', (REPO / "pyproject.toml").read_text())
    assert flink is not None
    assert spec["job"]["jarURI"] == f"local:///opt/flink/opt/flink-python-{flink.group(1)}.jar"
    assert spec["flinkConfiguration"]["python.executable"] == "/opt/venv/bin/python"
