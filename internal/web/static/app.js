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

// A signed-in page that the back button brings back from the browser's cache after its reader signed out is
// loaded again, signed out. The sign-out's answer clears that cache itself (Clear-Site-Data), but browsers honour it
// only on HTTPS and localhost.
const loadedAt = Date.now();
// Deleting the account signs out too; on window, after the document's listener that may cancel it (data-confirm).
window.addEventListener("submit", (event) => {
  if (!event.defaultPrevented && event.target.matches("form#signout, form#delete-account")) {
    localStorage.setItem("board-signed-out", String(Date.now()));
  }
});
window.addEventListener("pageshow", (event) => {
  const signedOut = Number(localStorage.getItem("board-signed-out"));
  if (event.persisted && document.getElementById("nav-user") && signedOut > loadedAt) {
    document.body.hidden = true;
    location.reload();
  }
});

// A form with data-confirm (a delete) asks first; without script it is sent at once.
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form.matches("form[data-confirm]") && !window.confirm(form.dataset.confirm)) event.preventDefault();
});

// A form with data-swap is sent in the background, with the value of the button pressed (the watch buttons have
// one each); the answer is the new HTML of the element it names, and the focus goes to its pressed button, or its
// first. Anything else (a sign-in page, an error) falls back to sending the form the ordinary way.
document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (event.defaultPrevented || !form.matches("form[data-swap]")) return;
  event.preventDefault();
  const body = new URLSearchParams(new FormData(form, event.submitter));
  const buttons = [...form.querySelectorAll("button")];
  for (const b of buttons) b.disabled = true;
  try {
    const res = await fetch(form.action, { method: "POST", body, headers: { "X-Fragment": "1" } });
    if (!res.ok || !res.headers.has("X-Fragment")) throw new Error(String(res.status));
    const target = document.getElementById(form.dataset.swap);
    target.replaceWith(fragment(await res.text()));
    const swapped = document.getElementById(form.dataset.swap);
    (swapped?.querySelector("button[aria-pressed=true]") ?? swapped?.querySelector("button"))?.focus();
  } catch {
    // submit() sends no button's value: the pressed one's goes along in a field of its own.
    if (event.submitter?.name) {
      const pressed = Object.assign(document.createElement("input"), { type: "hidden", name: event.submitter.name, value: event.submitter.value });
      form.append(pressed);
    }
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

// The bell: the unread count, kept live by the stream the web passes on from the notification service. On the
// newest page of the inbox, a notification that arrives goes on top, in place of its older self (a grouped like
// comes again with its new count); the page's own HTML for it is fetched, names and links made as the server does.
function watchNotifications() {
  const bell = document.getElementById("nav-bell");
  if (!bell || !("EventSource" in window)) return;
  const count = document.getElementById("bell-count");
  const showUnread = (n) => {
    count.textContent = String(n);
    count.hidden = n === 0;
    bell.setAttribute("aria-label", n > 0 ? `Notifications, ${n} unread` : "Notifications");
  };
  let refresh = null;
  const arrived = () => {
    const list = document.querySelector("#inbox[data-live]");
    if (!list || refresh) return;
    // Events that come together are fetched together.
    refresh = setTimeout(async () => {
      refresh = null;
      try {
        const res = await fetch("/notifications", { headers: { "X-Fragment": "1" } });
        if (!res.ok || !res.headers.has("X-Fragment")) return;
        const fresh = fragment(await res.text()).querySelectorAll("#inbox > li");
        for (const li of [...fresh].reverse()) {
          const old = document.getElementById(li.id);
          if (old && old.isEqualNode(li)) continue;
          old?.remove();
          list.prepend(li);
        }
        document.getElementById("inbox-empty")?.remove();
      } catch {
        // The next event or a reload shows it.
      }
    }, 100);
  };
  // The stream's last event id, for a stream the page opens again itself (the browser's own reconnects send it).
  let wait = 3000, source = null, retry = null, last = "";
  const seen = (e) => { if (e.lastEventId) last = e.lastEventId; };
  const open = () => {
    retry = null;
    source = new EventSource("/notifications/stream" + (last ? `?lastEventId=${encodeURIComponent(last)}` : ""));
    source.addEventListener("open", () => { wait = 3000; });
    source.addEventListener("unread", (e) => { seen(e); showUnread(JSON.parse(e.data).count); });
    source.addEventListener("notification", (e) => { seen(e); arrived(); });
    source.addEventListener("error", () => {
      // A dropped stream is reopened by the browser; a refusal (signed out, too many streams) closes it, and it is
      // tried again later, less and less often.
      if (source.readyState !== EventSource.CLOSED || retry) return;
      retry = setTimeout(open, wait);
      wait = Math.min(wait * 2, 300000);
    });
  };
  const close = () => {
    source?.close();
    clearTimeout(retry);
    source = retry = null;
  };
  const reopen = () => {
    if (source || document.hidden) return;
    open();
    arrived();
  };
  // Only a tab in sight holds a stream: a browser opens at most six connections to a site over HTTP/1.1, and
  // background tabs holding them would stall every other page. Back in sight, the stream's first event brings the
  // count, and the inbox is fetched for what came meanwhile.
  document.addEventListener("visibilitychange", () => { if (document.hidden) close(); else reopen(); });
  // A page with an open connection is not kept in the back/forward cache: the stream closes as the page is left,
  // and opens again if the page comes back from that cache.
  window.addEventListener("pagehide", close);
  window.addEventListener("pageshow", (event) => { if (event.persisted) reopen(); });
  if (!document.hidden) open();
}

// Quotes: a "Quote" button on the article and on each comment, for a reader who may comment, puts the selected
// passage of it (or the whole of it when nothing in it is selected) into the reply form as a Markdown block quote
// with a link to its source: a comment's own reply form when it has one, else the article's comment form. Without
// the script there are no such buttons; the text can still be copied by hand.
function quoteText(content) {
  const sel = window.getSelection();
  if (sel && sel.rangeCount > 0 && !sel.isCollapsed) {
    const range = sel.getRangeAt(0).cloneRange();
    if (range.intersectsNode(content)) {
      // Only the part inside this post: a selection that runs on into the next comment is cut at this one's end.
      if (!content.contains(range.startContainer)) range.setStart(content, 0);
      if (!content.contains(range.endContainer)) range.setEnd(content, content.childNodes.length);
      const text = range.toString().trim();
      if (text) return text;
    }
  }
  return content.innerText.trim();
}

function blockQuote(text, writer, link) {
  const lines = text.replace(/\r\n?/g, "\n").split("\n").map((l) => (l.trim() ? `> ${l}` : ">"));
  return `${lines.join("\n")}\n>\n> [— ${writer}](${link})\n\n`;
}

// fillReply adds the quote of text to what textarea holds. A quote longer than the form takes is cut short, its
// link kept.
function fillReply(textarea, text, writer, link) {
  const before = textarea.value.replace(/\s+$/, "");
  const lead = before ? `${before}\n\n` : "";
  const room = textarea.maxLength > 0 ? textarea.maxLength - lead.length : Infinity;
  let quote = blockQuote(text, writer, link);
  // Each round cuts at least one character more, so it ends.
  for (let cut = text; quote.length > room && cut.length > 0;) {
    cut = cut.slice(0, Math.max(1, cut.length - (quote.length - room)) - 1).trimEnd();
    quote = blockQuote(`${cut}…`, writer, link);
  }
  textarea.value = lead + quote;
  textarea.focus();
  textarea.setSelectionRange(textarea.value.length, textarea.value.length);
  textarea.scrollIntoView({ block: "nearest" });
}

// quoteButton is a post's "Quote" button: it quotes content, by writer, linked to link, into the textarea target()
// gives.
function quoteButton(label, content, writer, link, target) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "link quote";
  button.textContent = "Quote";
  button.setAttribute("aria-label", label);
  // A press of the mouse may clear the selection before the click: it is read as the button goes down. From the
  // keyboard the selection is as the reader left it.
  let text = null;
  button.addEventListener("mousedown", () => { text = quoteText(content); });
  button.addEventListener("click", () => {
    fillReply(target(), text ?? quoteText(content), writer, link);
    text = null;
  });
  return button;
}

// own is the first element matching sel in the comment li, not in a reply nested in it.
const own = (li, sel) => [...li.querySelectorAll(sel)].find((e) => e.closest("li.comment") === li);

function watchQuotes() {
  const commentForm = document.getElementById("comment-content");
  const article = document.getElementById("article");
  if (!commentForm || !article) return;
  const articlePath = location.pathname;
  const articleContent = document.getElementById("article-content");
  if (articleContent && !articleContent.classList.contains("hidden-content")) {
    const writer = document.getElementById("article-writer")?.textContent.trim() ?? "";
    // Before the writer's own Edit and Delete, which keep the end of the row.
    const actions = article.querySelector(".actions");
    actions?.insertBefore(quoteButton(`Quote the article by ${writer}`, articleContent, writer, articlePath, () => commentForm),
      actions.querySelector(".owner"));
  }
  for (const li of document.querySelectorAll("li.comment")) {
    const content = own(li, ".comment-content");
    if (!content || content.classList.contains("deleted") || content.classList.contains("hidden-content")) continue;
    const writer = own(li, ".comment-writer")?.textContent.trim() ?? "";
    let actions = own(li, ".comment-actions");
    if (!actions) {
      actions = document.createElement("div");
      actions.className = "comment-actions";
      li.append(actions);
    }
    // Into the comment's own reply form, opened, when it takes replies; else into the article's.
    actions.prepend(quoteButton(`Quote this comment by ${writer}`, content, writer, `${articlePath}#${li.id}`, () => {
      const reply = own(li, "details.reply");
      if (!reply) return commentForm;
      reply.open = true;
      return reply.querySelector("textarea");
    }));
  }
}

// The editor takes images: picked with its button, pasted, or dropped on it. Each goes to POST /media (the site
// passes it on to the media service) and its Markdown is put where the cursor is. Without script, a post is text.
function watchUploads() {
  for (const area of document.querySelectorAll("form textarea[name=content]")) {
    const status = document.createElement("span");
    status.className = "upload-status";
    status.setAttribute("role", "status");
    const picker = document.createElement("input");
    picker.type = "file";
    picker.accept = "image/png,image/jpeg,image/gif,image/webp";
    picker.multiple = true;
    picker.hidden = true;
    picker.setAttribute("aria-label", "Image to add");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "secondary upload-button";
    button.textContent = "Add image";
    button.addEventListener("click", () => picker.click());
    const bar = document.createElement("div");
    bar.className = "upload-bar";
    bar.append(button, picker, status);
    // After the form's own buttons: its submit stays the form's first button.
    area.form.append(bar);
    const insert = (text) => {
      const at = area.selectionStart ?? area.value.length;
      area.setRangeText(text, at, area.selectionEnd ?? at, "end");
      area.dispatchEvent(new Event("input", { bubbles: true }));
    };
    const send = async (files) => {
      for (const file of files) {
        if (!file.type.startsWith("image/")) continue;
        status.textContent = `Uploading ${file.name}…`;
        try {
          const res = await fetch("/media", { method: "POST", body: file, credentials: "same-origin",
            headers: { "Content-Type": file.type || "application/octet-stream" } });
          const body = await res.json();
          if (!res.ok) { status.textContent = body.message || "The image was not accepted."; continue; }
          const alt = file.name.replace(/\.[^.]*$/, "").replace(/[\[\]]/g, "") || "image";
          insert(`![${alt}](${body.url})`);
          status.textContent = "";
        } catch {
          status.textContent = "The image could not be sent; try again.";
        }
      }
    };
    picker.addEventListener("change", () => { send([...picker.files]); picker.value = ""; });
    area.addEventListener("paste", (e) => {
      const files = [...(e.clipboardData?.files || [])];
      if (files.length) { e.preventDefault(); send(files); }
    });
    area.addEventListener("dragover", (e) => { if (e.dataTransfer?.types.includes("Files")) e.preventDefault(); });
    area.addEventListener("drop", (e) => {
      const files = [...(e.dataTransfer?.files || [])];
      if (files.length) { e.preventDefault(); send(files); }
    });
  }
}

// Mentions: typing @ and the start of a name in a post offers up to 8 names that start so (the user service's,
// through /usernames), as a list under the text box. Up and Down move in it, Enter or Tab puts the name in, Escape
// closes it; a click puts one in. Without the script, names are typed whole.
const mentionBefore = /(?:^|[^A-Za-z0-9_])@([A-Za-z0-9_]{1,30})$/;
function watchMentions() {
  let lists = 0;
  for (const area of document.querySelectorAll("form textarea[name=content]")) {
    const list = document.createElement("ul");
    list.id = `mentions-${++lists}`;
    list.className = "mentions";
    list.setAttribute("role", "listbox");
    list.setAttribute("aria-label", "People to mention");
    list.hidden = true;
    area.after(list);
    // The box stays a multi-line text box (a combobox is one line); it names the list and its option in view.
    area.setAttribute("aria-autocomplete", "list");
    area.setAttribute("aria-controls", list.id);
    let names = [], active = -1, timer = null;
    const typed = () => mentionBefore.exec(area.value.slice(0, area.selectionStart))?.[1] ?? null;
    const show = () => {
      list.replaceChildren(...names.map((name, i) => {
        const option = document.createElement("li");
        option.id = `${list.id}-${i}`;
        option.setAttribute("role", "option");
        option.setAttribute("aria-selected", String(i === active));
        option.textContent = `@${name}`;
        // Down, not click: the text box keeps the focus, and with it the cursor the name goes to.
        option.addEventListener("mousedown", (e) => { e.preventDefault(); pick(i); });
        return option;
      }));
      list.hidden = names.length === 0;
      if (active >= 0 && !list.hidden) area.setAttribute("aria-activedescendant", `${list.id}-${active}`);
      else area.removeAttribute("aria-activedescendant");
    };
    const close = () => { names = []; active = -1; show(); };
    const pick = (i) => {
      const start = typed();
      if (start !== null) {
        const at = area.selectionStart;
        area.setRangeText(`${names[i]} `, at - start.length, at, "end");
        area.dispatchEvent(new Event("input", { bubbles: true }));
      }
      close();
    };
    area.addEventListener("input", () => {
      clearTimeout(timer);
      const start = typed();
      if (start === null) { close(); return; }
      timer = setTimeout(async () => {
        try {
          const res = await fetch(`/usernames?prefix=${encodeURIComponent(start.toLowerCase())}`);
          // An answer to what is no longer being typed is dropped.
          if (!res.ok || typed() !== start) return;
          names = await res.json();
          active = names.length > 0 ? 0 : -1;
          show();
        } catch {
          close();
        }
      }, 150);
    });
    area.addEventListener("keydown", (e) => {
      if (list.hidden) return;
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        active = (active + (e.key === "ArrowDown" ? 1 : names.length - 1)) % names.length;
        show();
      } else if ((e.key === "Enter" || e.key === "Tab") && active >= 0) {
        e.preventDefault();
        pick(active);
      } else if (e.key === "Escape") {
        e.preventDefault();
        close();
      }
    });
    area.addEventListener("blur", close);
  }
}

localTimes(document);
watchMore();
watchMentions();
watchQuotes();
watchNotifications();
watchUploads();
