// The dashboard's only page script besides htmx (served from this origin; no inline script).
// Copy buttons: hidden in the markup, shown when this script runs, so that without JavaScript
// no button does nothing. `data-copy` names the element whose text is copied.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("button[data-copy]")) {
    const source = document.getElementById(button.dataset.copy);
    if (!source || !navigator.clipboard) continue;
    button.hidden = false;
    const label = button.textContent;
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(source.textContent);
        button.textContent = "Copied";
      } catch {
        button.textContent = "Copy failed: select the text";
      }
      setTimeout(() => (button.textContent = label), 2000);
    });
  }
});
