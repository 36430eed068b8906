// groundscope report: the per-sample browser. Reads the JSON blob, filters it, renders one
// page of rows at a time, and builds a row's details only when it is opened. The DOM is built
// with textContent only: model output is never parsed as HTML.
"use strict";
(() => {
  const DATA = JSON.parse(document.getElementById("gs-data").textContent);
  const SAMPLES = DATA.samples;
  const PAGE = 50;
  const state = { outcome: "", flag: "", sort: "", subset: "", terms: [], page: 0 };
  let haystack = null;

  function h(tag, props, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "text") el.textContent = v;
      else el.setAttribute(k, v);
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid !== null && kid !== undefined && kid !== false) el.append(kid);
    }
    return el;
  }

  function pct(v) {
    return v === null || v === undefined ? "n/a" : `${(v * 100).toFixed(1).replace(/\.0$/, "")}%`;
  }

  function cut(text, n) {
    const s = String(text || "").replace(/\s+/g, " ").trim();
    return s.length > n ? `${s.slice(0, n - 1)}…` : s;
  }

  function where(s) {
    const ds = DATA.datasets[s.ds];
    const sub = ds.subsets[s.sub];
    return DATA.datasets.length > 1 ? `${ds.pretty} / ${sub}` : sub;
  }

  function messageText(s) {
    return s.messages.flatMap((m) => m.parts.filter((p) => p.t === "text").map((p) => p.x));
  }

  function searchText(s) {
    const bits = [s.id, s.origin, s.question, s.prediction, s.error, s.error_kind, ...s.refs,
      ...messageText(s), ...s.scores.map((c) => c.extracted)];
    return bits.filter((b) => b !== null && b !== undefined).join("\n").toLowerCase();
  }

  function matching() {
    if (state.terms.length && !haystack) haystack = SAMPLES.map(searchText);
    const out = [];
    for (let i = 0; i < SAMPLES.length; i++) {
      const s = SAMPLES[i];
      if (state.outcome && s.outcome !== state.outcome) continue;
      if (state.flag && !(s.flags || []).includes(state.flag)) continue;
      if (state.subset && `${s.ds}:${s.sub}` !== state.subset) continue;
      if (state.terms.length && !state.terms.every((t) => haystack[i].includes(t))) continue;
      out.push(i);
    }
    if (state.sort) {  // by the primary score; samples without one (errored, excluded) last
      const sign = state.sort === "asc" ? 1 : -1;
      const key = (i) => SAMPLES[i].pv;
      out.sort((a, b) => {
        const x = key(a), y = key(b);
        if (x === null || x === undefined) return y === null || y === undefined ? a - b : 1;
        if (y === null || y === undefined) return -1;
        return sign * (x - y) || a - b;
      });
    }
    return out;
  }

  function verdictClass(value) {
    const v = String(value).toLowerCase();
    if (/^(ok|pass|supported|correct|yes|true|a|equivalent)$/.test(v)) return "gs-badge gs-v-good";
    if (/^(fail|error|contradicted|incorrect|no|false|b|judge_failed)$/.test(v)) return "gs-badge gs-v-bad";
    return "gs-badge";
  }

  const VERDICT_KEYS = /^(verdict|status|label|outcome|equivalent)$/i;

  function value(v, key) {
    if (v === null || v === undefined) return h("span", { text: "—" });
    if (typeof v !== "object") {
      if (key && VERDICT_KEYS.test(key)) return h("span", { class: verdictClass(v), text: String(v) });
      return h("span", { class: "gs-text", text: String(v) });
    }
    if (Array.isArray(v)) {
      if (v.length && v.every((x) => x && typeof x === "object" && !Array.isArray(x))) {
        const cols = [...new Set(v.flatMap((x) => Object.keys(x)))];
        return h("table", { class: "gs-table" },
          h("thead", null, h("tr", null, h("th", { text: "#" }), cols.map((c) => h("th", { text: c })))),
          h("tbody", null, v.map((x, i) => h("tr", null, h("td", { text: String(i + 1) }),
            cols.map((c) => h("td", null, value(x[c], c)))))));
      }
      return h("ul", null, v.map((x) => h("li", null, value(x, key))));
    }
    return h("dl", null, Object.entries(v).map(([k, x]) => [h("dt", { text: k }), h("dd", null, value(x, k))]));
  }

  function media(part) {
    const m = DATA.media[part.m] || { kind: part.t, name: "?" };
    const blob = m.blob === undefined ? null : DATA.blobs[m.blob];
    const box = h("span", { class: "gs-media", title: m.name });
    if (blob && m.kind === "image") box.append(h("img", { src: blob, alt: m.name, loading: "lazy" }));
    else if (blob && m.kind === "video") {  // its first frame, marked as a video
      box.classList.add("gs-video");
      box.append(h("img", { src: blob, alt: `first frame of ${m.name}`, loading: "lazy" }),
        h("span", { class: "gs-file", text: `[video] ${m.name}` }));
    }
    else if (blob && m.kind === "audio") box.append(h("audio", { controls: "", preload: "none", src: blob }));
    else box.append(h("span", { class: "gs-file", text: `[${m.kind}] ${m.name}` }));
    box.append(h("small", { text: blob ? m.name : m.note || "" }));
    return box;
  }

  function messages(s) {
    return s.messages.map((msg) => h("div", { class: "gs-msg" },
      h("div", { class: "gs-role", text: msg.role }),
      msg.parts.map((p) => (p.t === "text" ? h("div", { class: "gs-text", text: p.x }) : media(p)))));
  }

  function scoresTable(s) {
    const rows = s.scores.map((c) => h("tr", null,
      h("td", { text: c.scorer }),
      h("td", null, h("span", { class: verdictClass(c.status), text: c.status })),
      h("td", { text: Object.entries(c.values).map(([k, x]) => `${k} ${pct(x)}`).join(" · ") || "—" }),
      h("td", { text: c.extracted === null || c.extracted === undefined ? "—" : String(c.extracted) })));
    return h("table", { class: "gs-table" },
      h("thead", null, h("tr", null, ["Scorer", "Status", "Values", "Extracted"].map((t) => h("th", { text: t })))),
      h("tbody", null, rows));
  }

  function body(s) {
    const left = [h("h4", { text: "Prompt" }), messages(s)];
    if (s.choices) left.push(h("h4", { text: "Choices" }), h("div", { class: "gs-box", text: s.choices.join("  ") }));
    const right = [h("h4", { text: "Prediction" })];
    if (s.status !== "ok") {
      right.push(h("div", { class: "gs-box gs-errbox", text: `${s.error_kind || "error"}: ${s.error || ""}` }));
    } else {
      right.push(h("div", { class: "gs-box", text: s.prediction === null ? "—" : s.prediction }));
    }
    if (s.reasoning) right.push(h("details", null, h("summary", { text: "Reasoning" }), h("div", { class: "gs-box", text: s.reasoning })));
    right.push(h("h4", { text: `Reference${s.refs.length === 1 ? "" : "s"}` }),
      s.refs.length ? h("ul", null, s.refs.map((r) => h("li", { class: "gs-text", text: r }))) : h("p", { text: "none" }));
    const full = [h("h4", { text: "Scores" }), scoresTable(s)];
    for (const c of s.scores) {
      if (c.detail && Object.keys(c.detail).length) {
        full.push(h("h4", { text: `${c.scorer}: detail` }), h("div", { class: "gs-detail" }, value(c.detail)));
      }
    }
    const facts = { origin: s.origin, latency_s: s.latency, attempts: s.attempts, repeat: s.repeat };
    if (s.metadata) facts.metadata = s.metadata;
    full.push(h("h4", { text: "Record" }), h("div", { class: "gs-detail" }, value(facts)));
    return h("div", { class: "gs-body" }, h("div", null, left), h("div", null, right),
      h("div", { class: "gs-full" }, full));
  }

  function row(s) {
    const primary = DATA.datasets[s.ds].primary_label;
    const flags = s.flags || [];
    // a contradicted claim is a hallucination whatever the primary score: never badged "pass"
    const badge = flags.includes("hallucinated") && s.outcome === "pass" ? "hallucinated" : s.outcome;
    const d = h("details", { class: `gs-sample gs-${s.outcome}`, "data-id": s.id },
      h("summary", null,
        h("span", { class: `gs-badge gs-badge-${badge}`, text: badge }),
        flags.filter((f) => f !== badge).map((f) => h("span", { class: `gs-badge gs-badge-${f}`, text: f })),
        h("code", { text: s.repeat ? `${s.id} #${s.repeat}` : s.id }),
        h("span", { class: "gs-where", text: where(s) }),
        h("span", { class: "gs-pv", text: s.pv === null ? "" : `${primary} ${pct(s.pv)}` }),
        h("span", { class: "gs-snippet", text: `${cut(s.question, 90)} → ${cut(s.status === "ok" ? s.prediction : s.error_kind, 90)}` })));
    d.addEventListener("toggle", () => {
      if (d.open && d.childElementCount === 1) d.append(body(s));
    });
    return d;
  }

  const $ = (id) => document.getElementById(id);

  function render() {
    const hits = matching();
    const pages = Math.max(1, Math.ceil(hits.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    const start = state.page * PAGE;
    const shown = hits.slice(start, start + PAGE);
    $("gs-list").replaceChildren(...shown.map((i) => row(SAMPLES[i])));
    const count = $("gs-count");
    count.dataset.count = String(hits.length);
    count.dataset.query = state.terms.join(" ");
    count.textContent = hits.length
      ? `${hits.length} matching · showing ${start + 1}–${start + shown.length}`
      : "no sample matches";
    $("gs-page").textContent = `page ${state.page + 1} of ${pages}`;
    $("gs-prev").disabled = state.page === 0;
    $("gs-next").disabled = state.page >= pages - 1;
  }

  function setup() {
    const subset = $("gs-subset");
    for (const [di, ds] of DATA.datasets.entries()) {
      const group = DATA.datasets.length > 1 ? h("optgroup", { label: ds.pretty }) : subset;
      ds.subsets.forEach((name, si) => group.append(h("option", { value: `${di}:${si}`, text: name })));
      if (group !== subset) subset.append(group);
    }
    $("gs-outcome").addEventListener("change", (e) => { state.outcome = e.target.value; state.page = 0; render(); });
    $("gs-flag").addEventListener("change", (e) => { state.flag = e.target.value; state.page = 0; render(); });
    $("gs-sort").addEventListener("change", (e) => { state.sort = e.target.value; state.page = 0; render(); });
    subset.addEventListener("change", (e) => { state.subset = e.target.value; state.page = 0; render(); });
    let timer = 0;
    $("gs-search").addEventListener("input", (e) => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        state.terms = e.target.value.toLowerCase().split(/\s+/).filter(Boolean);
        state.page = 0;
        render();
      }, 120);
    });
    $("gs-prev").addEventListener("click", () => { state.page -= 1; render(); });
    $("gs-next").addEventListener("click", () => { state.page += 1; render(); });
    render();
  }

  setup();
})();
