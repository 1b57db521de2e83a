// The dashboard's only page script besides htmx (served from this origin; no inline script).
// Copy buttons: hidden in the markup, shown when this script runs, so that without JavaScript
// no button does nothing. `data-copy` names the element whose text is copied; `data-copy-text`
// holds the text itself (a shortened id's full value).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("button[data-copy], button[data-copy-text]")) {
    const source = button.dataset.copy === undefined ? null : document.getElementById(button.dataset.copy);
    const text = () => (source ? source.textContent : button.dataset.copyText);
    if ((button.dataset.copy !== undefined && !source) || !navigator.clipboard) continue;
    button.hidden = false;
    const label = button.textContent;
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(text());
        button.textContent = "Copied";
      } catch {
        button.textContent = source ? "Copy failed: select the text" : "Copy failed";
      }
      setTimeout(() => (button.textContent = label), 2000);
    });
  }
});
