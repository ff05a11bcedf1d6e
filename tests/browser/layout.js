// What a person would find cut off on this page, as a list of sentences (empty: nothing).
// 1. A box that scrolls sideways is a table's .table-wrap, with its cue line shown above it and the
//    table's first column sticky; nothing else scrolls sideways, and the page itself never does.
// 2. Every element in the flow, and its content, fits inside its parent and inside its nearest
//    clipping box, unless a scrolling box holds it (rule 1 covers those).
// 3. Chart text lies inside its drawing and is drawn at 11 px or more.
// 4. A table[data-compare] (subjects side by side) shows every column without scrolling.
() => {
  const problems = [];
  const width = document.documentElement.clientWidth;
  const name = (el) => el.tagName.toLowerCase() + (el.id ? `#${el.id}` : "") +
    (typeof el.className === "string" && el.className.trim() ? `.${el.className.trim().split(/\s+/).join(".")}` : "");
  const shown = (el) => {
    if (el.closest("[hidden], details:not([open]) > :not(summary)")) return false;
    const style = getComputedStyle(el);
    if (style.display === "none" || style.visibility === "hidden") return false;
    const box = el.getBoundingClientRect();
    return box.width > 1 && box.height > 1;
  };
  const overflowX = (el) => getComputedStyle(el).overflowX;
  const scrolls = (el) => ["auto", "scroll"].includes(overflowX(el));
  const outOfFlow = (el) => ["absolute", "fixed"].includes(getComputedStyle(el).position);
  // Out of the flow, or inside something that is: a skip link, a visually hidden caption or thead.
  const placedApart = (el) => {
    for (let node = el; node && node !== document.body; node = node.parentElement) if (outOfFlow(node)) return true;
    return false;
  };

  if (document.documentElement.scrollWidth > width + 1) {
    problems.push(`the page scrolls sideways (${document.documentElement.scrollWidth} px wide for ${width})`);
  }
  const all = Array.from(document.querySelectorAll("body *")).filter((el) => !(el instanceof SVGElement) || el.tagName === "svg");
  for (const el of all) {
    if (!shown(el) || !scrolls(el) || el.scrollWidth <= el.clientWidth + 1) continue;
    if (!el.classList.contains("table-wrap")) {
      problems.push(`${name(el)} scrolls sideways, and is no table with a cue`);
      continue;
    }
    const cue = el.previousElementSibling;
    if (!cue || !cue.classList.contains("scroll-cue") || !shown(cue)) problems.push(`${name(el)} scrolls sideways with no cue shown`);
    const loose = Array.from(el.querySelectorAll("tr")).find((row) => row.firstElementChild &&
      getComputedStyle(row.firstElementChild).position !== "sticky");
    if (loose) problems.push(`${name(el)} scrolls sideways, and its first column is not sticky`);
  }
  for (const el of all) {
    if (!shown(el) || placedApart(el)) continue;
    let clip = el.parentElement;
    while (clip && clip !== document.body && overflowX(clip) === "visible") clip = clip.parentElement;
    if (clip && clip !== document.body && scrolls(clip)) continue;
    const box = el.getBoundingClientRect();
    const spill = el.scrollWidth - el.clientWidth;  // its own content (a long word, an unwrapped line) past its edge
    if (overflowX(el) === "visible" && el.clientWidth > 0 && spill > 1.5 && getComputedStyle(el).display !== "inline") {
      problems.push(`the content of ${name(el)} sticks out of it by ${Math.round(spill)} px`);
    }
    for (const [frame, what] of [[el.parentElement, "its parent"], [clip && clip !== document.body ? clip : null, "its box"]]) {
      if (!frame || frame === document.body || outOfFlow(frame)) continue;
      const outer = frame.getBoundingClientRect();
      const over = Math.max(box.right - outer.right, outer.left - box.left);
      if (over > 1.5) problems.push(`${name(el)} sticks out of ${what} ${name(frame)} by ${Math.round(over)} px`);
    }
  }
  for (const svg of document.querySelectorAll("svg.chart")) {
    if (!shown(svg)) continue;
    const view = svg.viewBox.baseVal;
    const frame = svg.getBoundingClientRect();
    const scale = frame.width / view.width;
    for (const text of svg.querySelectorAll("text")) {
      const box = text.getBoundingClientRect();  // as drawn: rotated labels too
      if (box.left < frame.left - 1 || box.right > frame.right + 1 || box.top < frame.top - 1 || box.bottom > frame.bottom + 1) {
        problems.push(`${name(svg)}: "${text.textContent}" is cut at the drawing's edge`);
      }
      const drawn = parseFloat(text.getAttribute("font-size") || getComputedStyle(text).fontSize) * scale;
      if (drawn < 10.95) problems.push(`${name(svg)}: "${text.textContent}" is drawn at ${drawn.toFixed(1)} px`);
    }
  }
  for (const table of document.querySelectorAll("table[data-compare]")) {
    if (!shown(table)) continue;
    const wrap = table.closest(".table-wrap") || table.parentElement;
    if (wrap.scrollWidth > wrap.clientWidth + 1) problems.push(`${name(table)} compares columns that are out of view`);
    const frame = wrap.getBoundingClientRect();
    const cut = Array.from(table.querySelectorAll("th, td")).find((cell) => shown(cell) && !placedApart(cell) &&
      (cell.getBoundingClientRect().right > frame.right + 1 || cell.getBoundingClientRect().left < frame.left - 1));
    if (cut) problems.push(`${name(table)}: "${cut.textContent.trim().slice(0, 40)}" is out of view`);
  }
  return problems;
}
