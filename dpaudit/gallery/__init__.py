"""Build the gallery: audits next to theory, reproducing the seed papers' findings.

``dpaudit gallery --out DIR`` runs the configs shipped in this package (one
folder per section: ``per_index``, ``stopped``, ``lssgd``, ``baselines``, ``hidden_state``,
``ladder``, ``schedules``), renders each audit's report, adds theory figures (Asoodeh et al. Fig. 2
comparison; DP-LSSGD's claim against the accountant at the paper's MNIST
settings), the section "real libraries" (:mod:`dpaudit.gallery.libraries`: DP libraries through their
adapters, those installed) and writes ``index.html``. ``--trials`` makes a reduced gallery
(CI builds one with every section holding audits).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from dpaudit import mechanisms
from dpaudit.auditing.jobs.config import load_configs
from dpaudit.auditing.jobs.runner import RunOptions, run_audits
from dpaudit.mechanisms.accounting.claims import evaluate_claims
from dpaudit.mechanisms.accounting.lssgd import lssgd_claim_noise
from dpaudit.reports import plots
from dpaudit.reports.html import summary_figure
from dpaudit.reports.render import as_document, write_all, write_text_atomic
from dpaudit.reports.bands import BAND_WORDS, CEILING_WORDS, notable_sentences
from dpaudit.reports.text import verdict_sentence

__all__ = ["SECTIONS", "Section", "build", "section_configs"]

HERE = Path(__file__).resolve().parent


@dataclasses.dataclass(frozen=True, slots=True)
class Section:
    """One section of the gallery: a folder of configs and what it shows."""

    folder: str
    heading: str
    text: str


SECTIONS = (
    Section("per_index", "(a) Per-index privacy of iterations with hidden state",
            "Certified epsilon at several canary positions next to the per-index bounds of amplification "
            "by iteration (Feldman et al. Thm 22/23) and, for one-dimensional instances, the exact value."),
    Section("stopped", "(b) Randomly stopped PNSGD: two analyses",
            "An audit of Stop-PNSGD at its worst index, then the two theoretical analyses of the same "
            "algorithm side by side."),
    Section("lssgd", "(c) DP-LSSGD: the paper's claim against the accountant",
            "An audit of DP-LSSGD next to its claims, then the paper's Thm 1 at its MNIST settings against "
            "accountants for the same noise."),
    Section("baselines", "(d) Baselines with exactly known privacy",
            "Mechanisms whose true epsilon is known: how close a certified lower bound gets."),
    Section("hidden_state", "(e) Is the hidden state private?",
            "Audits of the released last iterate of DP-SGD (Poisson batches and batches without replacement) "
            "and of PNSGD on the whole space by canary position, each beside its exact value and statistical "
            "ceiling; then a map of claims, exact values and ceilings as the steps, the sampling rate and "
            "the canary index vary (docs/theory.md 5.1)."),
    Section("ladder", "(f) The ladder: one DP-SGD instance, from the white box to the hidden state",
            "n = 1000 records, batches of 10, 100 steps (one epoch), noise 1 relative to the clipping norm on "
            "the batch sum, delta = 1e-5: every iterate released with shuffled batches (what most training "
            "loops do, usually reported with the Poisson accountant's 0.718), every iterate with Poisson "
            "batches (where that accountant is exact), the last iterate only, and the hidden state of "
            "projected noisy SGD with the same noise per step (docs/theory.md 6)."),
    Section("schedules", "(g) When does the hidden state hide anything?",
            "A crafted gradient inserted every k = 1, 5, 25 steps of DP-SGD (n = 100, batches of 100, 250 steps, "
            "noise multiplier 15.81, linear loss; Cebere et al. 2025), then one gradient at step 1 with a linear "
            "and with a concave loss (Annamalai 2024), and the same on PNSGD: certified, exact and the claims "
            "side by side (docs/theory.md 10)."),
)


def section_configs(section: Section) -> list[Path]:
    """The config files of one section, in a fixed order."""
    return sorted((HERE / section.folder).glob("*.toml"))


def stopped_comparison_svg(delta: float = 1e-5) -> str:
    """Asoodeh et al. Fig. 2 setting: n = 100, L = 1, beta = 1; epsilon of Stop-PNSGD by analysis."""
    figure, axes = plots.new_figure(figsize=(6.4, 3.6))
    sigmas = np.geomspace(0.5, 8.0, 12)
    for eta, colour in zip((0.1, 0.5, 1.0), ("C0", "C1", "C2")):
        contraction, rdp = [], []
        for sigma in sigmas:
            mech = mechanisms.make("pnsgd", n=100, dim=1, eta=eta, sigma=float(sigma), loss="huber",
                                   variant="stop", domain="box", low=0.0, high=1.0)
            entries = {e.name: e for e in evaluate_claims(mech.claims(), delta=delta)}
            contraction.append(entries["contraction-stopped"].epsilon or np.nan)
            rdp.append(entries["stop-rdp"].epsilon if entries["stop-rdp"].applicable else np.nan)
        axes.plot(sigmas, contraction, color=colour, marker="o", markersize=3, label=f"contraction, eta={eta}")
        if eta == 0.1:  # Thm 26 does not depend on eta: one curve for all
            axes.plot(sigmas, rdp, color="black", linestyle="--", label="RDP Thm 26 (any eta)")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("sigma")
    axes.set_ylabel(f"epsilon at delta={delta:g}")
    axes.set_title("Stop-PNSGD: E_gamma contraction vs converted RDP")
    axes.legend(fontsize=7)
    return plots.to_svg(figure)


def lssgd_svg(delta: float = 1e-5) -> str:
    """The paper's MNIST settings: claimed epsilon against the accountants for the same noise."""
    steps, n, batch = 50 * 469, 60_000, 128
    targets = [0.1, 0.15, 0.2, 0.25, 0.3]
    rows = {"lssgd-paper-thm1": [], "sgm-rdp": [], "wor-rdp-thm27": []}
    for eps in targets:
        nu = lssgd_claim_noise(epsilon=eps, delta=delta, steps=steps, n=n, lipschitz=1.0)
        for sampling in ("poisson", "without-replacement"):
            mech = mechanisms.make("dp-lssgd", n=n, dim=10, batch_size=batch, steps=steps, noise_std=nu,
                                   sampling=sampling)
            for entry in evaluate_claims(mech.claims(), delta=delta):
                if entry.name in rows and not (entry.name == "lssgd-paper-thm1" and sampling != "poisson"):
                    rows[entry.name].append(entry.epsilon)
    figure, axes = plots.new_figure(figsize=(6.4, 3.6))
    labels = {"lssgd-paper-thm1": "paper's Thm 1 (claimed)", "sgm-rdp": "Poisson accountant (MTZ, add/remove)",
              "wor-rdp-thm27": "without replacement (WBK Thm 27, replace-one)"}
    for name, values in rows.items():
        axes.plot(targets, values, marker="o", label=labels[name])
    axes.set_xlabel("target epsilon of the paper (MNIST: n=60000, b=128, 50 epochs)")
    axes.set_ylabel(f"epsilon at delta={delta:g}")
    axes.set_title("DP-LSSGD: claim against accountants for the same noise")
    axes.legend(fontsize=7)
    return plots.to_svg(figure)


def build(out: Path, *, trials: int | None, workers: int | None, store: str, progress: bool = False) -> Path:
    """Run the gallery audits and write ``out/index.html`` (and every audit's reports beside it).

    Parameters
    ----------
    out : Path
        The output directory (made when missing).
    trials : int, optional
        Trials per dataset for every audit (default: each config's; the real libraries' 10^5).
    workers : int, optional
        Worker processes (default: all cores).
    store : str
        The SQLite store of the chunks (reused by a later build).
    progress : bool
        Bars on stderr: the audits' chunks, then the theory figures.

    Returns
    -------
    Path
        ``out/index.html``.
    """
    out.mkdir(parents=True, exist_ok=True)
    jobs, owners = [], []
    for number, section in enumerate(SECTIONS):
        for config in load_configs(section_configs(section)):
            jobs.append((config.with_trials(trials) if trials else config).job())
            owners.append(number)
    results = run_audits(jobs, RunOptions(store=store, workers=workers, progress=progress))
    audits: list[list[tuple]] = [[] for _ in SECTIONS]
    for number, result in zip(owners, results):
        write_all(result, out)
        document = as_document(result)
        caption, svg = summary_figure(document)
        audits[number].append((result.title, " ".join([verdict_sentence(document), *notable_sentences(document)]),
                               result.audit_id, svg, caption))
    # the library audits load only when the gallery is built, with their optional libraries
    from dpaudit.gallery import libraries

    library_results, missing = libraries.library_audits(
        trials, lambda jobs: run_audits(jobs, RunOptions(store=store, workers=workers, progress=progress)))
    library_rows = []
    for result in library_results:
        write_all(result, out)
        library_rows.append((result.title, verdict_sentence(as_document(result)), result.audit_id))
    # the gallery's figures and tables load when it is built
    from dpaudit.gallery.ladder import ladder_table
    from dpaudit.gallery.maps import hidden_state_svg
    from dpaudit.gallery.schedules_table import schedules_table

    ladder = [result for number, result in zip(owners, results) if SECTIONS[number].folder == "ladder"]
    scheduled = [result for number, result in zip(owners, results) if SECTIONS[number].folder == "schedules"]
    makers = {"stopped": stopped_comparison_svg, "lssgd": lssgd_svg, "hidden_state": hidden_state_svg,
              "ladder": lambda: ladder_table(ladder), "schedules": lambda: schedules_table(scheduled)}
    figures = {}
    with tqdm(total=len(makers), desc="figures", unit="figure", file=sys.stderr, disable=not progress) as bar:
        for folder, make in makers.items():  # the theory maps take seconds each: the bar names the one drawn
            bar.set_postfix_str(folder)
            figures[folder] = make()
            bar.update(1)
    # jinja2 loads when a page is rendered
    from jinja2 import Environment, select_autoescape

    env = Environment(autoescape=select_autoescape(default=True))
    page = env.from_string(_INDEX).render(
        sections=[(section, audits[number], figures.get(section.folder)) for number, section in enumerate(SECTIONS)],
        libraries=(libraries.HEADING, libraries.TEXT, library_rows, missing),
        ceiling_words=CEILING_WORDS, band_words=BAND_WORDS)
    index = out / "index.html"
    write_text_atomic(index, page)
    return index


_INDEX = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>dpaudit gallery</title>
<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
.small{color:#666;font-size:.9em}</style></head><body>
<h1>dpaudit gallery: audits next to the theory</h1>
<p class="small" id="ceiling-words"><b>Statistical ceiling</b>: {{ ceiling_words }} <b>Ceiling band</b>: {{ band_words }}</p>
{% for section, audits, figure in sections %}
<section class="gallery-section" id="{{ section.folder }}">
<h2>{{ section.heading }}</h2><p class="small">{{ section.text }}</p>
{% for title, sentence, audit_id, svg, caption in audits %}
<div class="audit"><h3>{{ title }}</h3><p>{{ sentence }} <a href="{{ audit_id }}.html">full report</a></p>{{ svg | safe }}{% if caption %}<p class="small">{{ caption }}</p>{% endif %}</div>
{% endfor %}
{% if section.folder == "stopped" %}
<p class="small">Theory: n = 100, L = 1, beta = 1 (Huber loss), K = [0, 1]. Solid: E_gamma contraction (Thm 5,
worst index, the maximum over the index); dashed: Feldman et al. Thm 26 converted to DP (CKS), only at orders
alpha &le; alpha* where it holds; it does not depend on eta.</p>
{% elif section.folder == "lssgd" %}
<p class="small">Theory: noise from the paper's Thm 1 for its MNIST settings, against accountants for the same
noise and sampling.</p>
{% elif section.folder == "hidden_state" %}
<p class="small">Theory map at delta = 1e-5, gradient canaries. Left and middle: DP-SGD's last iterate (noise
multiplier 1, Poisson batches, canary against nothing); DP-LSSGD's last iterate is an invertible image of it and has
the same exact values. Right: PNSGD on the whole space (n = 20, sigma = 2, linear loss), where every step's noise
reaches the output, so the exact value does not depend on the index while the per-index bound of amplification by
iteration grows toward the last index. From a claim down to the exact value: the slack of the theorem; from the exact
value down to a ceiling: the slack any threshold audit with that many trials must leave (shaded: the ceiling's band,
where 95% of ideal threshold audits land).</p>
{% endif %}
{{ figure | safe if figure else "" }}
</section>
{% endfor %}
{% set heading, text, rows, missing = libraries %}
<section class="gallery-libraries" id="libraries"><h2>{{ heading }}</h2><p class="small">{{ text }}</p>
{% for title, sentence, audit_id in rows %}
<div class="audit"><h3>{{ title }}</h3><p>{{ sentence }} <a href="{{ audit_id }}.html">full report</a></p></div>
{% endfor %}
{% if missing %}<p class="small">Not installed here, so not audited: {{ missing | join(", ") }}
(pip install 'dpaudit[libraries]').</p>{% endif %}
</section>
</body></html>
"""
