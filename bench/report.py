"""BENCHMARKS.md from the latest results in bench/results/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _load(results: Path, name: str) -> dict[str, Any] | None:
    path = results / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


SECTIONS = ("minting", "resolution", "owners", "startup", "peer", "flood")


def write_report(target: Path, results: Path) -> None:
    loaded = {name: _load(results, name) for name in SECTIONS}
    lines = [
        "# Benchmarks",
        "",
        "Made by `python -m bench` (`make bench`); figures from the last run.",
        "",
    ]
    machine = next(
        (r["machine"] for r in (loaded["minting"], loaded["resolution"], loaded["startup"]) if r),
        None,
    )
    if machine:
        lines += _machine(machine)
    writers = {
        "minting": _minting,
        "resolution": _resolution,
        "owners": _owners,
        "startup": _startup,
        "peer": _peer,
        "flood": _flood,
    }
    for name, write in writers.items():
        result = loaded[name]
        if result:
            lines += write(result)
    history = results.parent / "history.md"  # kept by hand: runs compared across changes
    if history.is_file():
        lines += [history.read_text().rstrip("\n"), ""]
    target.write_text("\n".join(lines))


def _machine(machine: dict[str, Any]) -> list[str]:
    """The machine the figures were measured on."""
    lines: list[str] = []
    lines += [
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['system']}, "
        f"Python {machine['python']}; run {machine['date']}.",
        "",
    ]
    return lines


def _minting(minting: dict[str, Any]) -> list[str]:
    """The minting section: in-process service, then through the gateway."""
    lines: list[str] = []
    lines += [
        "## Minting",
        "",
        "In-process service (logic + DynamoDB store) over local mode's tables, N client threads:",
        "",
        "| subsystems | clients | per request | r (s) | IBIs/s | limit S/r | p50 ms | p99 ms | conflicts per IBI | state writes per request |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind in ("single", "batch", "coarse", "subsystems"):
        for row in minting.get(kind, []):
            lines.append(
                f"| {row.get('subsystems', 1)} | {row['clients']} | {row['count']} | {row['granularity']} | {row['ibis_per_second']} "
                f"| {row['limit_per_second']:g} | {row['p50_ms']} | {row['p99_ms']} | {row['conflicts_per_ibi']} "
                f"| {row.get('state_writes_per_request', '—')} |"
            )
    batches = minting.get("batch", [])
    alone = next((r for r in batches if r["clients"] == 1 and r["count"] == 1000), None)
    writes = alone.get("state_writes_per_request") if alone else None
    lines += [
        "",
        "State writes are the conditional writes the client sent to the state table, counted",
        "as they left it (attempts that lost a race included), per mint request.",
        "",
        f"Target: a batch of 1000 IBIs costs one state write: **{writes}** per batch of 1000 "
        f"with one client ({'met' if writes == 1 else 'NOT met'}).",
        "",
        "Through the local API Gateway stand-in (HTTP) over local mode's tables, as `ibi local`",
        "serves it: one handler process per request in flight and a new connection per request",
        "(as Lambda scales), then two processes and kept-alive connections (as the peer run's",
        "`ibi local`), without and with blocks of dates (`IBI_MINT_BLOCK_SECONDS`, local mode's",
        "setting). State writes, conflicts and waits are the services' own counters, summed over",
        "the processes:",
        "",
        "| clients | handler processes | connections | block s | IBIs/s | p50 ms | p99 ms | state writes per request | conflicts per request |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows = [*minting["gateway"], *minting.get("gateway_two_workers", [])]
    lines += [
        f"| {r['clients']} | {r.get('workers', max(2, r['clients']))} "
        f"| {'kept' if r.get('keep_alive') else 'one per request'} | {r.get('block_seconds', '0')} "
        f"| {r['ibis_per_second']} | {r['p50_ms']} | {r['p99_ms']} "
        f"| {r.get('state_writes_per_request', '—')} | {r.get('conflicts_per_request', '—')} |"
        for r in rows
    ]
    lines += ["", "![minting](bench/results/minting.png)", ""]
    return lines


def _resolution(resolution: dict[str, Any]) -> list[str]:
    """The resolution section: fan-out against hints, by number of Archives."""
    lines: list[str] = []
    lines += [
        "## Resolution (Archives answering in 20 ms on loopback; one holds the IBI)",
        "",
        "Requests are urlRequests per resolution as the Archives counted them; CPU is the",
        "resolver's per resolution; max RSS is the peak of the process running the resolver",
        "(and the benchmark).",
        "",
        "| Archives | + slow & dead | fan-out p50 / p99 ms | requests | with hints p50 / p99 ms | requests | serial p50 ms | CPU ms (fan-out) | max RSS MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in resolution["rows"]:
        fan, hinted = row["no_hints"], row["concurrent"]
        serial = row.get("serial")
        lines.append(
            f"| {row['archives']} | {'yes' if row['slow_and_dead'] else 'no'} "
            f"| {fan['p50_ms']} / {fan['p99_ms']} | {fan.get('requests_counted_by_archives', fan['archive_requests_per_resolution'])} "
            f"| {hinted['p50_ms']} / {hinted['p99_ms']} | {hinted.get('requests_counted_by_archives', hinted['archive_requests_per_resolution'])} "
            f"| {serial['p50_ms'] if serial else '—'} | {fan['cpu_ms_per_resolution']} | {row.get('max_rss_mb', '—')} |"
        )
    ratio = resolution["target_64_over_1"]
    verdict = "met" if ratio <= 1.5 else "NOT met"
    plain = [r for r in resolution["rows"] if not r["slow_and_dead"]]
    hinted = round(plain[-1]["concurrent"]["p50_ms"] / plain[0]["concurrent"]["p50_ms"], 2)
    lines += [
        "",
        f"Target: 64 Archives within 1.5× of one: full fan-out **{ratio}×** ({verdict}); with a",
        f"location hint **{hinted}×** ({'met' if hinted <= 1.5 else 'NOT met'}). The fake Archives",
        "run in a process of their own, so the CPU column is the resolver's alone: every",
        "Archive of a round is one coroutine on one event loop, over a kept-alive connection.",
        "The Archives share one prefix, which none owns: since issue 34 a first-time round",
        "waits the grace (50 ms) after the first original's answer, to hear a second claim",
        "(the figures above are from before it: bench/history.md, 2026-12-02); with",
        "`ibiurl.requireditemstatus=Original` every Archive is waited for (up to its timeout).",
        "Location hints ask the Archive that held the IBI first, alone: one request instead",
        "of N when the hint is right. An owned prefix's round ends with its owner's answer.",
        "",
        "![resolution](bench/results/resolution.png)",
        "",
    ]
    return lines


def _counted(owners: dict[str, Any]) -> str:
    batches = owners.get("requests_per_batch", [])
    sent = sum(b["sent"] for b in batches)
    counted = sum(b["counted_by_archives"] for b in batches)
    return f"{counted:,} of {sent:,}" if sent else "—"


def _load_average(owners: dict[str, Any]) -> str:
    before, after = owners.get("load_average", ["—", "—"])
    return f"{before} at the start and {after} at the end"


def _owners(owners: dict[str, Any]) -> list[str]:
    """Owners at scale: the four scenarios, the head start's designs, a Bloom filter."""
    rows = {(r["scenario"], r["design"]): r for r in owners["rows"]}
    chosen = {s: r for (s, d), r in rows.items() if d == "adaptive (chosen)"}
    usd = owners.get("usd_per_million", {})
    names = {
        "a": "(a) the owner holds the original",
        "b": "(b) the original transferred once",
        "c refused": "(c) the owner down (port closed), a copy elsewhere",
        "c silent": "(c) the owner down (takes requests, never answers), a copy elsewhere",
        "d": "(d) a prefix with no owner, an original somewhere",
        "d copy": "(d) a prefix with no owner, only a copy: today's fan-out for (c)",
    }
    lines = [
        f"## Owners at scale (issue 24): {owners['archives']:,} Archives on loopback",
        "",
        f"{owners['archives'] - 1:,} fake Archives in one process (one asyncio server per port,",
        "answering urlRequests in 20 ms) and one registered at a closed port, each owning its",
        "service IBI's prefix, registered and included in the resolver as built by its wiring",
        "over local mode's tables, in this process. Every resolution asks for an IBI never",
        "asked before; the scenarios take turns, one resolution each, 0.5 s apart. Requests",
        "are the urlRequests the resolver sent per resolution (the Archives counted "
        f"{_counted(owners)}: the closed port's and those still on their way are missing);",
        "CPU is the resolver's, with its requests that ended after the resolution; USD per",
        "million first-time resolutions from `bench/scale.py`'s prices (docs/scale.md). The",
        "head start chosen (`OwnerPace`): twice the owner's slowest recent answer, within 0.5",
        "and 1 s; none for an owner that did not answer in its last round. The machine's load",
        f"average was {_load_average(owners)} (other work included).",
        "",
        "| scenario | requests per resolution | first resolution's | p50 / p99 ms | max ms "
        "| resolver CPU ms | USD per million |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, name in names.items():
        if key in chosen:
            r = chosen[key]
            lines.append(
                f"| {name} | {r['requests_per_resolution']} | {r['first_requests']} "
                f"| {r['p50_ms']} / {r['p99_ms']} | {r['max_ms']} | {r['cpu_ms_per_resolution']} "
                f"| {usd.get(key, '—')} |"
            )
    fan = chosen.get("d copy", chosen.get("d", {}))
    met_a = chosen["a"]["requests_per_resolution"] == 1
    met_b = chosen["b"]["requests_per_resolution"] <= 2
    met_c = all(
        chosen[c]["requests_per_resolution"] <= fan["requests_per_resolution"]
        and chosen[c]["p50_ms"] <= fan["p50_ms"] * 1.25
        for c in ("c refused", "c silent")
    )
    lines += [
        "",
        f"Targets: (a) 1 request: **{chosen['a']['requests_per_resolution']}** "
        f"({'met' if met_a else 'NOT met'}); (b) ≤ 2: **{chosen['b']['requests_per_resolution']}** "
        f"({'met' if met_b else 'NOT met'}); (c) as today's fan-out or better (requests ≤, p50 "
        f"within 1.25× of the fan-out that finds a copy, {fan['p50_ms']} ms): "
        f"**{chosen['c refused']['p50_ms']}** and **{chosen['c silent']['p50_ms']} ms** "
        f"({'met' if met_c else 'NOT met'}); (d) is that fan-out. A black-holed owner costs the",
        "first resolution of an execution environment its head start (1 s: the max column);",
        "after that it is asked with everyone until it answers again. (c) and (d) with a copy",
        "wait the 50 ms grace for an original after the copy's answer.",
        "",
        "The owner's head start, design by design (each from a fresh environment; the owners",
        "answer originals, the black hole's items have a copy elsewhere):",
        "",
        "| owner | design | requests per resolution | p50 / p99 ms | max ms |",
        "|---|---|---|---|---|",
    ]
    profiles = {
        "c silent": "down (black hole)",
        "cold": "400 ms cold start every 25 requests",
        "far": "always 300 ms",
    }
    designs = ("waited (before)", "fixed 50 ms", "adaptive, floor 50 ms", "adaptive (chosen)")
    for key, profile in profiles.items():
        for design in designs:
            if (key, design) in rows:
                r = rows[(key, design)]
                lines.append(
                    f"| {profile} | {design} | {r['requests_per_resolution']} "
                    f"| {r['p50_ms']} / {r['p99_ms']} | {r['max_ms']} |"
                )
    lines += [
        "",
        "Waiting for the owner (before) costs the Archive timeout (3 s) on every resolution",
        "while it is down; a short fixed head start fans out to everyone whenever the owner is",
        "a little slow (far away, or cold): each time a request to every Archive.",
        "",
        "A Bloom filter of the IBIs one Archive holds (measured here in pure Python, not built;",
        "docs/decisions.md):",
        "",
        "| IBIs held | false positives: target / measured | bits per IBI | hashes | bytes "
        "| lookup µs |",
        "|---|---|---|---|---|---|",
    ]
    for b in owners.get("bloom", []):
        lines.append(
            f"| {b['items']:,} | {b['target_false_positives']} / {b['measured_false_positives']} "
            f"| {b['bits_per_item']} | {b['hashes']} | {b['bytes']:,} | {b['lookup_us']} |"
        )
    lines += ["", "![owners](bench/results/owners.png)", ""]
    return lines


def _startup(startup: dict[str, Any]) -> list[str]:
    """The start-up section: each handler's import time."""
    lines: list[str] = []
    lines += [
        "## Start-up",
        "",
        "Each handler imported from its deployment package as `cdk synth` builds it, by the",
        "runtime's Python version when this machine has it, with botocore as the runtime",
        "provides it (precompiled). *As built*: with the bytecode the package ships (compiled",
        "for the runtime when an interpreter of its version was found at synth); *no bytecode*:",
        "the package's modules compiled at every start, as on Lambda's read-only `/var/task`",
        "when a package ships none.",
        "",
        "| handler | Python | import as built ms | -X importtime ms | no bytecode ms | bytecode shipped | package MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in startup["imports"].items():
        size = startup["packages"].get(name, {}).get("mb", "—")
        lines.append(
            f"| {name} | {row.get('python', '—')} | {row['wall_ms']} | {row['importtime_ms']} "
            f"| {row.get('wall_uncompiled_ms', '—')} | {'yes' if row.get('bytecode_shipped') else 'no'} | {size} |"
        )
    worst = max(row["wall_ms"] for row in startup["imports"].values())
    lines += [
        "",
        f"Target: handler import under 300 ms: worst {worst} ms ({'met' if worst < 300 else 'NOT met'}).",
        "",
        "![startup](bench/results/startup.png)",
        "",
        "The handlers use Powertools' Logger, Metrics and event handler but not its Tracer (the",
        "X-Ray SDK builds two AWS clients at import: 250 ms), and botocore without boto3 (whose",
        "import pulls in s3transfer: 170 ms); Lambda's active tracing still records every",
        "invocation. AWS clients are made on the first request. The resolver imports httptools",
        "(a C extension, about 4 ms) at the first Archive answer it parses, not at start-up: its",
        "wheel in the package is built for the Lambda's arm64 and cannot load on this machine.",
        "",
    ]
    return lines


def _ratio(ours: float, theirs: float) -> float | None:
    """ibi ÷ arklet, or None when arklet's figure is zero."""
    return round(ours / theirs, 2) if theirs else None


def _times(ratio: float | None) -> str:
    return "—" if ratio is None else f"{ratio:g}×"


def _side(ours: dict[str, Any], theirs: dict[str, Any], key: str) -> str:
    """``ibi / arklet (ibi ÷ arklet)`` of one figure of two phases."""
    return f"{ours[key]:g} / {theirs[key]:g} ({_times(_ratio(ours[key], theirs[key]))})"


PEER_ROWS = (
    ("mint bound to a URL: ibi deposit with `url`, arklet `POST /mint`", "deposit", "mint"),
    ("bare mint: ibi `POST /mint` (no URL), arklet `POST /mint`", "mint", "mint"),
    ("warm resolution to a 302", "resolve", "resolve"),
)


def _peer_table(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """One row per operation and number of clients, each figure as ibi / arklet (÷)."""
    lines = [
        "| operation | clients | answers/s | p50 ms | p99 ms | server CPU ms per answer | wrong answers |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, mine, peers in PEER_ROWS:
        for row, other in zip(ours[mine], theirs[peers], strict=True):
            lines.append(
                f"| {label} | {row['clients']} | {_side(row, other, 'ops_per_second')} "
                f"| {_side(row, other, 'p50_ms')} | {_side(row, other, 'p99_ms')} "
                f"| {_side(row, other, 'cpu_ms_per_op')} | {row['wrong']} / {other['wrong']} |"
            )
    return lines


def _cpu_per_answer(phases: list[dict[str, Any]]) -> float:
    """Server CPU per answer over several phases: their CPU summed over their answers."""
    answers = [int(p["right"]) + int(p["wrong"]) for p in phases]
    spent = sum(float(p["cpu_ms_per_op"]) * n for p, n in zip(phases, answers, strict=True))
    return spent / max(1, sum(answers))


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def _peer_targets(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """The targets of issue 14, each with this run's ratio and whether it is met."""

    def at(rows: list[dict[str, Any]], clients: int) -> dict[str, Any]:
        return next(r for r in rows if r["clients"] == clients)

    p50 = _ratio(at(ours["resolve"], 1)["p50_ms"], at(theirs["resolve"], 1)["p50_ms"])
    cpu = _ratio(_cpu_per_answer(ours["resolve"]), _cpu_per_answer(theirs["resolve"]))
    wide = _ratio(
        at(ours["resolve"], 16)["ops_per_second"], at(theirs["resolve"], 16)["ops_per_second"]
    )
    deposit = _ratio(
        at(ours["deposit"], 1)["ops_per_second"], at(theirs["mint"], 1)["ops_per_second"]
    )
    lines = [
        "Targets (issue 14), ibi ÷ arklet in this run:",
        "",
        f"- warm resolution p50 at 1 client ≤ 2×: **{_times(p50)}** ({_verdict(p50 is not None and p50 <= 2)})",
        f"- server CPU per resolution (the three resolution phases) ≤ 3×: **{_times(cpu)}** "
        f"({_verdict(cpu is not None and cpu <= 3)})",
        f"- resolution throughput at 16 clients ≥ 0.5×: **{_times(wide)}** "
        f"({_verdict(wide is not None and wide >= 0.5)})",
    ]
    for clients in (4, 16):
        mine, other = at(ours["mint"], clients), at(theirs["mint"], clients)
        rate = _ratio(mine["ops_per_second"], other["ops_per_second"])
        p99 = _ratio(mine["p99_ms"], other["p99_ms"])
        met = rate is not None and rate >= 1 and p99 is not None and p99 <= 2
        lines.append(
            f"- bare mint at {clients} clients, throughput ≥ 1×: **{_times(rate)}**, p99 ≤ 2×: "
            f"**{_times(p99)}** ({_verdict(met)})"
        )
    lines.append(
        f"- deposit with `url` at 1 client ≥ 1× arklet's mint: **{_times(deposit)}** "
        f"({_verdict(deposit is not None and deposit >= 1)})"
    )
    if exact := ours.get("exact_counts"):
        same = exact["accesses"] == exact["redirects"] == exact["resolutions"]
        lines.append(
            f"- access counts still exact: one item resolved {exact['resolutions']} times by 16 "
            f"clients at once, {exact['redirects']} redirects, **{exact['accesses']}** accesses "
            f"counted by its Archive ({_verdict(same)})"
        )
    return [*lines, ""]


def _idle(peer: dict[str, Any], system: str) -> str:
    return f"{peer.get('idle_cpu_ms_per_second', {}).get(system, '—')}"


def _peer(peer: dict[str, Any]) -> list[str]:
    """The peer section: ibi beside arklet, under one load generator in the same run."""
    ours, theirs = peer["ibi"], peer["arklet"]
    load = peer.get("load_average", ["—", "—"])
    lines = [
        "## A peer in the same run: arklet 0.2.3 (ARK minter and resolver)",
        "",
        f"arklet runs as deployed: {theirs['server']}, its Django settings",
        "(`bench/arklet_settings.py`). ibi runs as `ibi local` with two worker processes per",
        "API (the API Gateway stand-in over local mode's SQLite tables and SeaweedFS). Both serve at the same time",
        "and one load generator drives them: N client threads, each with its own `http.client`",
        f"connection, sending requests back to back for {peer['seconds_per_phase']:g} s per",
        f"operation and number of clients, in {peer.get('slices_per_phase', 1)} slices that",
        "alternate between the two systems. Every answer is checked: a resolution must be a",
        "302 to the URL the identifier was minted with, a mint a 200 (an Archive deposit a",
        "201) with an identifier; only right answers are counted and timed.",
        "",
        "Server CPU is the user + system time (`/proc/<pid>/stat`) of every process of the",
        "server's tree — for ibi every API's gateway workers (the tables included) and SeaweedFS; for arklet",
        "the gunicorn master and its workers — from a slice's start to 0.3 s after its end",
        "(work left in the background counts), per answer. Idle, the trees spent "
        f"{_idle(peer, 'ibi')} (ibi) and {_idle(peer, 'arklet')} (arklet) ms of CPU per second.",
        "The load generator shares the machine's cores with the servers; the machine's load",
        f"average (its other work included) was {load[0]} at the start of the run and",
        f"{load[1]} at its end.",
        "",
        "Each figure is ibi / arklet (ibi ÷ arklet):",
        "",
        *_peer_table(ours, theirs),
        "",
        "arklet's mint draws a random name and inserts it with its URL in one SQLite",
        "transaction. ibi's bare mint issues an IBI from the subsystem's state and binds it to",
        "nothing; a deposit with `url` is what binds an IBI to a URL (the Archive mints it",
        "through the minting API and records the item).",
        "",
        *_peer_targets(ours, theirs),
        *_peer_breakdown(ours),
        "![peer](bench/results/peer.png)",
        "",
        *_negotiation(ours),
    ]
    return lines


def _peer_breakdown(ours: dict[str, Any]) -> list[str]:
    """Where an ibi resolution's time goes, from the per-hop measurements of the same run."""
    whole = ours["sequential_resolve"]["p50_ms"]
    hop, asked = ours["hop"]["p50_ms"], ours["archive_url_request"]["p50_ms"]
    counts = ", ".join(f"{c:g}" for c in ours["archive_requests_per_resolution"])
    rest = round(whole - hop - asked, 2)
    return [
        "Where an ibi resolution's time goes (p50 of "
        f"{ours['hop']['n']} sequential requests each, one client, in",
        f"the same run): a whole warm resolution **{whole} ms**; one HTTP hop through the",
        f"gateway to a handler that does no I/O (the resolver's landing page) **{hop} ms**;",
        f"the Archive's urlRequest asked directly, its own hop included, **{asked} ms**; the",
        f"remainder, **{rest} ms**, is the resolver's own work and whatever runs beside it on",
        "the same cores. Archive requests per resolution, as the two Archives' gateways",
        f"counted them: {counts} (urlRequests and acknowledgments).",
        "",
    ]


def _negotiation(ours: dict[str, Any]) -> list[str]:
    """Content negotiation (issue 16): a negotiated answer beside the redirect of one item."""
    if "negotiated" not in ours:
        return []
    redirect, bibtex = ours["negotiated"]["redirect"], ours["negotiated"]["bibtex"]
    lines = [
        "Content negotiation (issue 16): the same item with Dublin Core, asked alternately",
        "for its redirect and, with `Accept: application/x-bibtex`, for its citation (the",
        "same resolution, its urlRequest also carrying `extension.holdings=yes`):",
        "",
        "| warm, same item | ibi p50 / p99 ms |",
        "|---|---|",
        f"| redirect (302) | {redirect['p50_ms']} / {redirect['p99_ms']} |",
        f"| negotiated BibTeX (200) | {bibtex['p50_ms']} / {bibtex['p99_ms']} |",
    ]
    if formatted := ours["negotiated"].get("formatted"):
        lines.append(
            "| formatted citation, `text/x-bibliography; style=apa` (200) | "
            f"{formatted['p50_ms']} / {formatted['p99_ms']} |"
        )
    return [*lines, ""]


def _flood(flood: dict[str, Any]) -> list[str]:
    """The flood section: resolution and /status while refused inclusion requests pour in."""
    total, rate = flood["flood"]["requests"], flood["flood"]["per_second"]
    answers = ", ".join(f"{n} × {status}" for status, n in flood["flood"]["answers"].items())
    phases = [
        ("before", "alone"),
        ("during_control", f"during {total:,} inspector requests at the same rate (control)"),
        ("during", f"during {total:,} refused inclusion requests ({rate}/s)"),
        ("after", "after"),
    ]
    lines = [
        "## A flood of refused inclusion requests (issue 11)",
        "",
        "The resolver behind the gateway stand-in over local mode's tables, one fake Archive answering in",
        f"20 ms. {flood['flood']['clients']} clients send refused inclusion requests: nine in ten",
        "for random unregistered IBIs, one in ten a wrong key for the registered Archive from 8",
        f"loopback addresses ({answers}). The control sends as many requests, at the same rate,",
        "that read no table. One more client measures, one after the other, a resolution and a",
        "`/status`:",
        "",
        "| phase | resolution p50 / p99 ms | /status p50 / p99 ms | CPU ms per flood request |",
        "|---|---|---|---|",
    ]
    for key, label in phases:
        if key in flood:
            r, st = flood[key]["resolution"], flood[key]["status"]
            cpu = flood[key].get("cpu_ms_per_request", "—")
            lines.append(
                f"| {label} | {r['p50_ms']} / {r['p99_ms']} | {st['p50_ms']} / {st['p99_ms']} "
                f"| {cpu} |"
            )
    before, after = flood["items_before"], flood["items_after"]
    grown = {table: after[table] - before[table] for table in before}
    lines += [
        "",
        f"Items written by the flood: {', '.join(f'`{t}` +{n}' for t, n in grown.items())} "
        "(the registry, then the throttle counters: one per guessing source and one for the "
        "Archive).",
        "",
        "Target: the registry does not grow and no request scans it, so a flood slows "
        "resolution only by the CPU its own requests take from the machine's cores: **registry "
        f"+{grown[next(iter(grown))]} items**; resolution p50 "
        f"{flood['before']['resolution']['p50_ms']} ms alone, "
        f"{flood['during']['resolution']['p50_ms']} ms during the refused flood "
        f"({flood['during'].get('cpu_ms_per_request', '—')} ms CPU per request: handler, "
        "one GetItem in the local tables), "
        f"{flood['during_control']['resolution']['p50_ms']} ms during the control "
        f"({flood['during_control'].get('cpu_ms_per_request', '—')} ms CPU per request), "
        f"{flood['after']['resolution']['p50_ms']} ms after. In AWS concurrent requests run in "
        "execution environments of their own, and DynamoDB's latency does not depend on load."
        if "during_control" in flood
        else "Target: the registry does not grow and no request scans it.",
        "",
    ]
    return lines
