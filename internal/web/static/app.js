// Progressive enhancement of board's pages: every page works without this script.
"use strict";

// Dates arrive in UTC; show them in the reader's locale and time zone.
const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
function localTimes(root) {
  for (const t of root.querySelectorAll("time[datetime]")) {
    const d = new Date(t.dateTime);
    if (!Number.isNaN(d.getTime())) { t.title = t.textContent; t.textContent = dateFormat.format(d); }
  }
}

function fragment(html) {
  const tpl = document.createElement("template");
  tpl.innerHTML = html;
  localTimes(tpl.content);
  return tpl.content;
}

// A form with data-confirm (a delete) asks first; without script it is sent at once.
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form.matches("form[data-confirm]") && !window.confirm(form.dataset.confirm)) event.preventDefault();
});

// A form with data-swap is sent in the background; the answer is the new HTML of the element it names. Anything
// else (a sign-in page, an error) falls back to sending the form the ordinary way.
document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (event.defaultPrevented || !form.matches("form[data-swap]")) return;
  event.preventDefault();
  const button = form.querySelector("button");
  if (button) button.disabled = true;
  try {
    const res = await fetch(form.action, { method: "POST", body: new URLSearchParams(new FormData(form)), headers: { "X-Fragment": "1" } });
    if (!res.ok || !res.headers.has("X-Fragment")) throw new Error(String(res.status));
    const target = document.getElementById(form.dataset.swap);
    target.replaceWith(fragment(await res.text()));
    document.querySelector(`#${form.dataset.swap} button`)?.focus();
  } catch {
    form.submit();
  }
});

// Endless scroll: as the "More articles" link nears the screen, its chunk is appended to the list.
function watchMore() {
  const more = document.getElementById("more");
  const list = document.getElementById("articles");
  if (!more || !list || !("IntersectionObserver" in window)) return;
  const observer = new IntersectionObserver(async (entries) => {
    if (!entries.some((e) => e.isIntersecting)) return;
    observer.disconnect();
    try {
      const res = await fetch(more.href, { headers: { "X-Fragment": "1" } });
      if (!res.ok || !res.headers.has("X-Fragment")) throw new Error(String(res.status));
      const chunk = fragment(await res.text());
      list.append(...chunk.querySelectorAll("li.article"));
      const next = chunk.getElementById("more");
      if (next) { more.replaceWith(next); watchMore(); } else { more.remove(); }
    } catch {
      // The link stays: following it still shows the next articles.
    }
  }, { rootMargin: "600px" });
  observer.observe(more);
}

localTimes(document);
watchMore();
