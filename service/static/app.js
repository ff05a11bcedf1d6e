// Tokenmill dashboards: progressive enhancement only. Every page works without this file;
// with it, uploads show progress, jobs update live and the playground answers as you type.
"use strict";

(function () {
  const csrf = () => document.querySelector('meta[name="csrf-token"]')?.content || "";

  async function postJSON(url, body) {
    const response = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRF-Token": csrf() },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
    const data = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(data.detail || `request failed (${response.status})`);
    return data;
  }

  // Upload: the same multipart form, sent with XMLHttpRequest for its progress events.
  function enhanceUpload(form) {
    const bar = document.getElementById("upload-progress");
    const status = document.getElementById("upload-status");
    form.addEventListener("submit", (event) => {
      if (!form.checkValidity()) return;  // let the browser point at the missing field
      event.preventDefault();
      const button = form.querySelector('button[type="submit"]');
      const xhr = new XMLHttpRequest();
      xhr.open("POST", form.action);
      xhr.setRequestHeader("Accept", "application/json");
      xhr.upload.addEventListener("progress", (e) => {
        if (!e.lengthComputable) return;
        const percent = Math.round((100 * e.loaded) / e.total);
        bar.value = percent;
        status.textContent = percent < 100 ? `Uploading… ${percent} %` : "Checking and counting…";
      });
      xhr.addEventListener("load", () => {
        let data = {};
        try { data = JSON.parse(xhr.responseText); } catch (_) { /* not JSON: reported below */ }
        if (xhr.status === 201 && data.location) {
          status.textContent = "Uploaded.";
          window.location.assign(data.location);
          return;
        }
        button.disabled = false;
        bar.hidden = true;
        status.textContent = "";
        showUploadError(form, data.detail || `Upload failed (${xhr.status}).`, data.field);
      });
      xhr.addEventListener("error", () => {
        button.disabled = false;
        bar.hidden = true;
        showUploadError(form, "The upload was interrupted; check the connection and try again.", null);
      });
      button.disabled = true;
      bar.hidden = false;
      bar.value = 0;
      status.textContent = "Uploading… 0 %";
      xhr.send(new FormData(form));
    });
  }

  function showUploadError(form, message, field) {
    let summary = document.getElementById("error-summary");
    if (!summary) {
      summary = document.createElement("div");
      summary.id = "error-summary";
      summary.className = "error-summary";
      summary.setAttribute("role", "alert");
      form.before(summary);
    }
    summary.replaceChildren();
    const heading = document.createElement("h2");
    heading.textContent = "The corpus was not uploaded";
    const text = document.createElement("p");
    text.textContent = message;
    summary.append(heading, text);
    form.querySelectorAll('[aria-invalid="true"]').forEach((el) => el.removeAttribute("aria-invalid"));
    const input = field && document.getElementById(`corpus-${field}`);
    if (input) {
      input.setAttribute("aria-invalid", "true");
      input.focus();
    }
  }

  // Jobs: poll each queued or running job every second (its row, or its page); reload once one finishes.
  function watchJobs(rows) {
    const finished = ["succeeded", "failed", "cancelled"];
    const tick = async () => {
      for (const row of rows) {
        let job;
        try {
          const response = await fetch(`/jobs/${row.dataset.job}/status`, { headers: { Accept: "application/json" } });
          if (!response.ok) continue;
          job = await response.json();
        } catch (_) {
          continue;  // a dropped connection: try again at the next tick
        }
        if (finished.includes(job.status)) {
          window.location.reload();
          return;
        }
        const status = row.querySelector('[data-field="status"]');
        status.textContent = job.status;
        status.className = `status status-${job.status}`;
        row.querySelector('[data-field="stage"]').textContent = job.stage;
        row.querySelector("progress").value = job.progress;
        row.querySelector('[data-field="percent"]').textContent = `${Math.round(100 * job.progress)} %`;
      }
      window.setTimeout(tick, 1000);
    };
    window.setTimeout(tick, 1000);
  }

  // Playground: encode with this version and the chosen comparison, side by side; with the
  // "Sample" box ticked, this version's panel is a seeded sampled encode (BPE-dropout or Unigram).
  function enhancePlayground(form) {
    const text = form.querySelector("textarea");
    const compare = form.querySelector("select");
    const panels = [document.getElementById("pg-main"), document.getElementById("pg-other")];
    const error = document.getElementById("pg-error");
    const sample = document.getElementById("pg-sample");
    const seed = document.getElementById("pg-seed");
    const knobs = Array.from(form.querySelectorAll("#pg-sampling input[type=number]"));
    let timer = null;
    let latest = 0;
    const sampling = () => {
      if (!sample || !sample.checked) return null;
      const options = {};
      // An empty box takes the version's default; anything else is the server's to check (a 422 names it).
      knobs.forEach((input) => { if (input.value !== "") options[input.name] = Number(input.value); });
      return options;
    };
    const run = async () => {
      const request = ++latest;
      const options = sampling();
      const bodies = [{ text: text.value, target: form.dataset.target, ...(options ? { sampling: options } : {}) },
                      { text: text.value, target: compare.value }];
      try {
        const results = await Promise.all(bodies.map((body) => postJSON("/playground/encode", body)));
        if (request !== latest) return;  // a newer keystroke already asked again
        results.forEach((result, i) => { panels[i].innerHTML = result.html; });  // escaped by the server's template
        error.hidden = true;
        const url = new URL(window.location.href);
        url.searchParams.set("text", text.value);
        url.searchParams.set("compare", compare.value);
        ["sample", ...knobs.map((input) => input.name)].forEach((name) => url.searchParams.delete(name));
        if (options) {
          url.searchParams.set("sample", "on");
          knobs.forEach((input) => url.searchParams.set(input.name, input.value));
        }
        url.hash = "playground";
        window.history.replaceState(null, "", url);
      } catch (e) {
        if (request !== latest) return;
        error.textContent = e.message;
        error.hidden = false;
      }
    };
    const soon = () => { window.clearTimeout(timer); timer = window.setTimeout(run, 300); };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (event.submitter && event.submitter.id === "pg-reseed" && seed) {
        // Next seed: one more than the box holds, ticking the box (a reseed is a request to sample).
        seed.value = String(((Number(seed.value) || 0) + 1) % 2147483648);
        if (sample) sample.checked = true;
      }
      run();
    });
    text.addEventListener("input", soon);
    compare.addEventListener("change", run);
    if (sample) sample.addEventListener("change", run);
    knobs.forEach((input) => input.addEventListener("input", () => { if (sample.checked) soon(); }));
  }

  // Tables wider than their box scroll inside it: say so above each one, while it does.
  function cueScrolling() {
    const wraps = Array.from(document.querySelectorAll(".table-wrap"));
    const cues = wraps.map((wrap) => {
      const cue = document.createElement("p");
      cue.className = "scroll-cue";
      cue.hidden = true;
      cue.textContent = "Scroll sideways in the table for more columns";
      wrap.before(cue);
      return cue;
    });
    const update = () => wraps.forEach((wrap, i) => {
      const more = wrap.scrollWidth > wrap.clientWidth + 1;
      wrap.classList.toggle("scrolls", more);
      cues[i].hidden = !more;
    });
    update();
    window.addEventListener("resize", update);
    document.addEventListener("toggle", update, true);  // a <details> opened: its tables now have a width
    document.addEventListener("change", update);  // "also show characters per token" widens the matrix
  }

  // New job: what the form would start, said again as it is filled in (the same server-side advice
  // "Check these choices" renders without script).
  function adviseJob(form) {
    const box = document.getElementById("job-advice");
    let timer = null;
    let latest = 0;
    const ask = async () => {
      const request = ++latest;
      const fields = new FormData(form);
      fields.delete("check");
      try {
        const response = await fetch("/jobs/new/advice", { method: "POST", body: fields, credentials: "same-origin",
                                                           headers: { Accept: "application/json" } });
        const data = await response.json();
        if (response.ok && request === latest) box.innerHTML = data.html;  // escaped by the server's template
      } catch (_) { /* the advice stays as it was; submitting still checks everything */ }
    };
    const soon = () => { window.clearTimeout(timer); timer = window.setTimeout(ask, 400); };
    form.addEventListener("change", soon);
    form.addEventListener("input", soon);
  }

  document.addEventListener("DOMContentLoaded", () => {
    cueScrolling();
    const jobForm = document.getElementById("job-form");
    if (jobForm) adviseJob(jobForm);
    document.getElementById("error-summary")?.focus();  // a refused form: start where the problem is told
    const upload = document.getElementById("upload-form");
    if (upload) enhanceUpload(upload);
    const rows = Array.from(document.querySelectorAll("[data-job]"));  // the jobs page's rows, a job page's facts
    if (rows.length) watchJobs(rows);
    const playground = document.querySelector("form.playground");
    if (playground) enhancePlayground(playground);
    if (document.querySelector('[data-pending="true"]')) window.setTimeout(() => window.location.reload(), 2000);
  });
})();

// ---- BPE step-through (/bpe) -----------------------------------------------------------------
// The page works as a GET form without this; with it, Step / Back / Reset / Automerge move
// between states fetched from /bpe/steps (HTML the server renders from the same templates, a
// window of them at a time), editing the corpus or the tie-break recounts at once, and the
// vocabulary and merge lists (sent whole, numbered) show as much as the state has learned.
(function () {
  const MAX_URL = 4000;  // longer corpora stay out of the address bar (the server reads 16 kB request lines)

  async function postSteps(body) {
    const token = document.querySelector('meta[name="csrf-token"]')?.content || "";
    const response = await fetch("/bpe/steps", {
      method: "POST",
      headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRF-Token": token },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
    const data = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(data.detail || `request failed (${response.status})`);
    return data;
  }

  function corpusRequest(form) {
    const fields = new FormData(form);
    return { corpus: fields.get("corpus") || "", tie_break: fields.get("tie_break") || "first_seen",
             end_of_word: fields.get("end_of_word") !== null };
  }

  function versionRequest(form) {
    const fields = new FormData(form);
    return { tokenizer: fields.get("tokenizer"), version: fields.get("version") || "latest",
             corpus_id: fields.get("corpus_id"), lines: Number(fields.get("lines")) || 50 };
  }

  function enhanceBpe(controls) {
    const corpusForm = document.getElementById("bpe-corpus-form");
    const versionForm = document.getElementById("bpe-version-form");
    const stateBox = document.getElementById("bpe-state");
    const lists = document.getElementById("bpe-lists");
    const error = document.getElementById("bpe-error");
    const buttons = Object.fromEntries(Array.from(controls.querySelectorAll("button[data-go]"), (b) => [b.dataset.go, b]));
    const hidden = Object.fromEntries(Array.from(controls.querySelectorAll('input[type="hidden"]'), (i) => [i.name, i.value]));
    let request = hidden.tokenizer ? versionRequest(versionForm) : corpusRequest(corpusForm);
    let states = new Map();
    let step = Number(controls.dataset.step);
    let total = Number(controls.dataset.total);
    let generation = 0;  // bumped when the corpus, rule or version changes: late answers are dropped
    let playing = 0;     // bumped to stop a running Automerge

    async function load(start) {
      const mine = generation;
      const data = await postSteps({ ...request, start });
      if (mine !== generation) return false;
      if (!states.size) {
        lists.innerHTML = data.lists;  // escaped by the server's template
        document.getElementById("bpe-run-h").textContent = data.heading;
        corpusForm.classList.toggle("bpe-active", data.mode === "corpus");
        versionForm.classList.toggle("bpe-active", data.mode === "version");
      }
      total = data.total_steps;
      data.states.forEach((s) => states.set(s.step, s));
      return true;
    }

    function showLists(state) {
      lists.querySelectorAll("#bpe-vocab li").forEach((li) => { li.hidden = Number(li.dataset.i) >= state.vocabulary_size; });
      lists.querySelectorAll("#bpe-merges li").forEach((li) => {
        const i = Number(li.dataset.i);
        li.hidden = i >= state.step;
        li.classList.toggle("bpe-latest", i === state.step - 1);
      });
      lists.querySelector("#bpe-vocab-size").textContent = state.vocabulary_size;
      lists.querySelector("#bpe-merge-count").textContent = state.step;
      lists.querySelector("#bpe-no-merges").hidden = state.step > 0;
    }

    function remember(k) {
      const url = new URL(window.location.href);
      url.search = "";
      Object.entries(request).forEach(([name, value]) => {
        if (name === "end_of_word") { if (value) url.searchParams.set(name, "on"); } else url.searchParams.set(name, value);
      });
      url.searchParams.set("step", k);
      if (url.href.length > MAX_URL) url.searchParams.delete("corpus");
      window.history.replaceState(null, "", url);
    }

    async function show(k) {
      k = Math.max(0, Math.min(k, total));
      if (!states.has(k) && !(await load(k))) return;
      const state = states.get(Math.min(k, total));
      if (!state) return;
      step = state.step;
      stateBox.innerHTML = state.html;  // escaped by the server's template
      showLists(state);
      document.getElementById("bpe-step").textContent = step;
      document.getElementById("bpe-total").textContent = total;
      buttons.back.disabled = step === 0;
      buttons.step.disabled = buttons.auto.disabled = buttons.end.disabled = step >= total;
      error.hidden = true;
      remember(step);
    }

    async function run(action) {
      try { await action(); } catch (e) { playing += 1; error.textContent = e.message; error.hidden = false; }
    }

    async function automerge() {
      const mine = ++playing;
      while (mine === playing && step < total) {
        await show(step + 1);
        // The whole run in about four seconds, a quarter of a second a step at most.
        await new Promise((done) => window.setTimeout(done, Math.max(30, Math.min(250, 4000 / total))));
      }
    }

    async function restart(next, keepStep) {
      playing += 1;
      generation += 1;
      request = next;
      states = new Map();
      const k = keepStep ? step : 0;
      if (await load(k)) await show(k);
    }

    controls.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-go]");
      if (!button) return;
      event.preventDefault();
      const go = button.dataset.go;
      if (go === "auto") { run(automerge); return; }
      playing += 1;
      // "To the end" asks for the last state alone: no animation, one request however long the run.
      run(() => show(go === "reset" ? 0 : go === "end" ? total : go === "back" ? step - 1 : step + 1));
    });
    let typing = null;
    corpusForm.addEventListener("input", (event) => {
      if (event.target.name !== "corpus") return;
      window.clearTimeout(typing);
      typing = window.setTimeout(() => run(() => restart(corpusRequest(corpusForm), false)), 400);
    });
    corpusForm.addEventListener("change", (event) => {
      // Another rule or marker on the same corpus: stay at the same step, to compare.
      if (event.target.name !== "corpus") run(() => restart(corpusRequest(corpusForm), !request.tokenizer));
    });
    corpusForm.addEventListener("submit", (event) => { event.preventDefault(); run(() => restart(corpusRequest(corpusForm), false)); });
    versionForm.addEventListener("submit", (event) => {
      if (!versionForm.querySelector("select")) return;  // nothing to replay yet: the form has no fields
      event.preventDefault();
      run(() => restart(versionRequest(versionForm), false));
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    const controls = document.getElementById("bpe-controls");
    if (controls) enhanceBpe(controls);
  });
})();

// ---- Corpus ids and deletion (corpora pages) -------------------------------------------------
// Without this file the id is still one click to select (user-select: all) and a delete button
// posts at once; with it, a Copy button puts the id on the clipboard and a delete asks first.
(function () {
  function enhanceCopy(button) {
    const source = document.getElementById(button.dataset.copy);
    const status = button.parentElement.querySelector(".copy-status");
    if (!source) return;
    button.hidden = false;
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(source.textContent.trim());
        if (status) status.textContent = "Copied.";
      } catch (_) {
        // No clipboard (an http page on another host): select the id for Ctrl+C instead.
        window.getSelection().selectAllChildren(source);
        if (status) status.textContent = "Selected: press Ctrl+C to copy.";
      }
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("button[data-copy]").forEach(enhanceCopy);
    document.querySelectorAll("form[data-confirm]").forEach((form) => {
      form.addEventListener("submit", (event) => {
        if (!window.confirm(form.dataset.confirm)) event.preventDefault();
      });
    });
  });
})();
