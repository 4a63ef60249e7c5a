"use strict";
(function () {
  var data = JSON.parse(document.getElementById("agentrl-data").textContent);
  var episodes = data.episodes;
  var visible = episodes.slice();
  var current = -1;

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (key === "text") { node.textContent = attrs[key]; } else { node.setAttribute(key, attrs[key]); }
    });
    (children || []).forEach(function (child) { if (child) { node.appendChild(child); } });
    return node;
  }
  function pct(x) { return (100 * x).toFixed(1) + "%"; }
  function num(x, digits) { return Number(x).toFixed(digits); }

  function renderSummary() {
    document.getElementById("title").textContent =
      "agentrl evaluation: " + data.label + " (" + data.source + ", " + episodes.length + " episodes)";
    var table = document.getElementById("summary");
    var head = ["split", "games", "success", "reward", "env steps", "invalid", "tool format", "admissible"];
    table.appendChild(el("tr", {}, head.map(function (h) { return el("th", { text: h }); })));
    data.summaries.forEach(function (s) {
      var cells = [s.split, String(s.episodes), pct(s.success), num(s.reward, 4), num(s.steps, 1),
        num(s.invalid, 2), pct(s.format), pct(s.admissible)];
      table.appendChild(el("tr", { "data-split": s.split }, cells.map(function (c) { return el("td", { text: c }); })));
    });
  }

  function matches(ep, split, outcome, text) {
    if (split && ep.split !== split) { return false; }
    if (outcome === "won" && !ep.won) { return false; }
    if (outcome === "lost" && ep.won) { return false; }
    if (!text) { return true; }
    var hay = [ep.id, ep.task_type, ep.description].concat(ep.turns.map(function (t) { return t.action || ""; }));
    return hay.join("\n").toLowerCase().indexOf(text) >= 0;
  }

  function renderList() {
    var split = document.getElementById("filter-split").value;
    var outcome = document.getElementById("filter-outcome").value;
    var text = document.getElementById("filter-text").value.trim().toLowerCase();
    visible = episodes.filter(function (ep) { return matches(ep, split, outcome, text); });
    var list = document.getElementById("episodes");
    list.textContent = "";
    visible.forEach(function (ep) {
      var item = el("li", { "data-id": ep.id }, [
        el("span", { "class": "badge " + (ep.won ? "won" : "lost"), text: ep.won ? "won" : "lost" }),
        el("span", { text: ep.task_type }),
        el("div", { "class": "id", text: ep.id }),
        el("div", { "class": "muted", text: ep.env_steps + " steps, " + ep.invalid + " invalid, " + ep.stop_reason })
      ]);
      if (ep.id === (episodes[current] || {}).id) { item.className = "selected"; }
      item.addEventListener("click", function () { location.hash = encodeURIComponent(ep.id); });
      list.appendChild(item);
    });
    document.getElementById("count").textContent = visible.length + " of " + episodes.length + " games";
  }

  function fact(name, value) { return el("span", {}, [el("b", { text: name + ": " }), document.createTextNode(String(value))]); }

  function renderEpisode(index) {
    current = index;
    var ep = episodes[index];
    var main = document.getElementById("detail");
    main.textContent = "";
    var prev = el("button", { type: "button", text: "\u2190 previous" });
    var next = el("button", { type: "button", text: "next \u2192" });
    prev.addEventListener("click", function () { step(-1); });
    next.addEventListener("click", function () { step(1); });
    main.appendChild(el("div", { "class": "nav" }, [prev, next]));
    main.appendChild(el("h2", { id: "episode-title", text: ep.id }));
    main.appendChild(el("div", { id: "episode-task", text: ep.description || ep.task_id }));
    main.appendChild(el("div", { "class": "facts", id: "episode-facts" }, [
      fact("outcome", ep.won ? "won" : "not won"), fact("stop", ep.stop_reason), fact("reward", num(ep.reward, 3)),
      fact("env steps", ep.env_steps), fact("invalid actions", ep.invalid), fact("type", ep.task_type),
      fact("split", ep.split), fact("tokens", ep.tokens), ep.error ? fact("error", ep.error) : null,
      ep.reward_error ? fact("reward error", ep.reward_error) : null
    ]));
    if (ep.reward_detail) {
      main.appendChild(el("details", { open: "open", id: "reward-detail" }, [
        el("summary", { text: "what the reward function said (judge)" }), el("pre", { text: ep.reward_detail })]));
    }
    main.appendChild(el("details", {}, [el("summary", { text: "initial prompt (system and first user message)" }),
      el("pre", { text: ep.system }), el("pre", { text: ep.first_user })]));
    var table = el("table", { "class": "turns", id: "turns" }, [el("tr", {}, [
      el("th", { text: "#" }), el("th", { text: "action" }), el("th", { text: "status" }), el("th", { text: "observation" })])]);
    ep.turns.forEach(function (t) {
      var calls = t.calls || [];
      var action = t.action !== null ? el("span", { text: t.action }) : el("em", { text: "(no valid call) " + (t.error || "") });
      if (t.action !== null && calls.length) {
        action = el("div", { "class": "calls" }, calls.map(function (c, k) {
          var parts = [el("div", { "class": "call-name", text: (calls.length > 1 ? (k + 1) + ". " : "") + c.name })];
          Object.keys(c.arguments).forEach(function (key) {
            parts.push(el("div", { "class": "call-arg", text: key }));
            parts.push(el("pre", { "class": "call-value", text: c.arguments[key] }));
          });
          return el("div", { "class": "call" }, parts);
        }));
      }
      var feedback = t.observation !== null ? t.observation : "(state not advanced)";
      if (t.env_error) { feedback += "\n[env error] " + t.env_error; }
      var shown = [el("pre", { text: feedback })];
      if (t.action !== null && calls.length) {
        shown = calls.map(function (c, k) {
          return el("div", { "class": "call-output" }, [
            el("div", { "class": "call-name", text: (calls.length > 1 ? (k + 1) + ". " : "") + c.name + " \u2192" }),
            el("pre", { text: c.output === null ? "(not run)" : c.output })]);
        });
        if (t.env_error) { shown.push(el("pre", { text: "[env error] " + t.env_error })); }
      }
      if (t.cut) {
        table.appendChild(el("tr", { "class": "context-cut" }, [el("td", { colspan: "4",
          text: "context cut: turns 1\u2013" + t.cut + " are left out of the prompts from here on" })]));
      }
      table.appendChild(el("tr", { "class": "turn", "data-status": t.status }, [
        el("td", { "class": "n", text: String(t.n) }),
        el("td", { "class": "action" }, [action]),
        el("td", {}, [el("span", { "class": "status " + t.status, text: t.status.replace("_", " ") })]),
        el("td", { "class": "observation" }, shown.concat([
          el("details", {}, [el("summary", { text: "assistant text" }), el("pre", { text: t.text })])]))
      ]));
    });
    main.appendChild(table);
    renderList();
  }

  function step(delta) {
    if (!visible.length) { return; }
    var pos = visible.indexOf(episodes[current]);
    var target = visible[Math.min(visible.length - 1, Math.max(0, pos + delta))];
    location.hash = encodeURIComponent(target.id);
  }

  function fromHash() {
    var id = decodeURIComponent(location.hash.replace(/^#/, ""));
    var index = episodes.findIndex(function (ep) { return ep.id === id; });
    if (index < 0 && episodes.length) { index = 0; }
    if (index >= 0) { renderEpisode(index); } else { renderList(); }
  }

  var splits = [];
  episodes.forEach(function (ep) { if (splits.indexOf(ep.split) < 0) { splits.push(ep.split); } });
  splits.forEach(function (s) { document.getElementById("filter-split").appendChild(el("option", { value: s, text: s })); });
  ["filter-split", "filter-outcome", "filter-text"].forEach(function (id) {
    document.getElementById(id).addEventListener("input", renderList);
  });
  document.addEventListener("keydown", function (event) {
    if (event.target && event.target.tagName === "INPUT") { return; }
    if (event.key === "j") { step(1); }
    if (event.key === "k") { step(-1); }
  });
  window.addEventListener("hashchange", fromHash);
  renderSummary();
  fromHash();
})();
