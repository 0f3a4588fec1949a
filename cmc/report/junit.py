"""`--junit FILE`: the verdict as JUnit XML, the test report CI servers render (Jenkins,
GitLab, GitHub's test reporters): one test suite, the model; one test case per property.

- A property violated is a `<failure>`: its message TLC's error line, its text the
  counterexample as cmc printed it.
- The other properties of a search that stopped at a violation were not checked to
  the end: `<skipped>`, saying so.
- A search that ended without a violation passes every property; under `--strict` a
  finding (cmc/coverage.py) fails the run as a test case of its own, `vacuity`.
- A run that ended in an error (exit 2, 3, 4 or an interrupt) is one `<error>` test
  case, `cmc`, with the message.

Only the elements and attributes the common JUnit schema (Ant's, which those servers
read) requires or allows are written.
"""
from __future__ import annotations

import socket
import time
import xml.etree.ElementTree as ET

from .json import write_atomically


def report(*, model: str, started: float, elapsed: float, properties: list[tuple[str, str]],
           outcome=None, failure_text: str = "", error: str | None = None,
           findings: list = (), strict: bool = False) -> bytes:
    """The XML document. `properties` are the model's (kind, name) in file order;
    `outcome` the engine's Outcome, or None when the run ended in `error`."""
    suite = ET.Element("testsuite", name=f"cmc {model}", package="cmc", id="0",
                       timestamp=time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
                       hostname=socket.gethostname() or "localhost")
    cases = []
    if outcome is None:
        case = ET.Element("testcase", classname=model, name="cmc", time="0")
        ET.SubElement(case, "error", message=_one_line(error or "error"),
                      type="error").text = error or ""
        cases.append(case)
    else:
        violated = outcome.prop if outcome.verdict != "ok" else None
        for kind, name in properties:
            case = ET.Element("testcase", classname=model, name=f"{kind} {name}", time="0")
            if violated is not None and (str(violated.kind), violated.name) == (kind, name):
                ET.SubElement(case, "failure", message=violated.kind.violated(name),
                              type=kind).text = failure_text
            elif violated is not None:
                ET.SubElement(case, "skipped", message="not checked to the end: the search "
                              f"stopped at the violation of {violated.kind} {violated.name}")
            cases.append(case)
        if strict and findings and violated is None:
            case = ET.Element("testcase", classname=model, name="vacuity", time="0")
            text = "\n".join(f.message for f in findings)
            ET.SubElement(case, "failure", message=_one_line(findings[0].message),
                          type="vacuity").text = text
            cases.append(case)
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(c.find("failure") is not None for c in cases)))
    suite.set("errors", str(sum(c.find("error") is not None for c in cases)))
    suite.set("skipped", str(sum(c.find("skipped") is not None for c in cases)))
    suite.set("time", f"{elapsed:.3f}")
    cases[0].set("time", f"{elapsed:.3f}")          # the run's time, once
    suite.append(ET.Element("properties"))
    suite.extend(cases)
    ET.SubElement(suite, "system-out").text = "\n".join(f.message for f in findings)
    ET.SubElement(suite, "system-err").text = ""
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"


def _one_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def write(path: str, data: bytes) -> None:
    """Write atomically: a CI job never reads half a report."""
    write_atomically(path, data, ".cmc-junit-")
