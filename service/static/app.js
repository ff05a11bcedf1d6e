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

  // Jobs: poll each queued or running job every second; reload once one finishes.
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

  // Playground: encode with this version and the chosen comparison, side by side.
  function enhancePlayground(form) {
    const text = form.querySelector("textarea");
    const compare = form.querySelector("select");
    const panels = [document.getElementById("pg-main"), document.getElementById("pg-other")];
    const error = document.getElementById("pg-error");
    let timer = null;
    let latest = 0;
    const run = async () => {
      const request = ++latest;
      const targets = [form.dataset.target, compare.value];
      try {
        const results = await Promise.all(targets.map((target) => postJSON("/playground/encode", { text: text.value, target })));
        if (request !== latest) return;  // a newer keystroke already asked again
        results.forEach((result, i) => { panels[i].innerHTML = result.html; });  // escaped by the server's template
        error.hidden = true;
        const url = new URL(window.location.href);
        url.searchParams.set("text", text.value);
        url.searchParams.set("compare", compare.value);
        url.hash = "playground";
        window.history.replaceState(null, "", url);
      } catch (e) {
        error.textContent = e.message;
        error.hidden = false;
      }
    };
    form.addEventListener("submit", (event) => { event.preventDefault(); run(); });
    text.addEventListener("input", () => { window.clearTimeout(timer); timer = window.setTimeout(run, 300); });
    compare.addEventListener("change", run);
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.getElementById("error-summary")?.focus();  // a refused form: start where the problem is told
    const upload = document.getElementById("upload-form");
    if (upload) enhanceUpload(upload);
    const rows = Array.from(document.querySelectorAll("tr[data-job]"));
    if (rows.length) watchJobs(rows);
    const playground = document.querySelector("form.playground");
    if (playground) enhancePlayground(playground);
    if (document.querySelector('[data-pending="true"]')) window.setTimeout(() => window.location.reload(), 2000);
  });
})();
