// The saga page follows its saga: on each `moved` event from the page's stream,
// fetch the page again and swap in every [data-live] section whose HTML changed.
// Plain JavaScript, no build step; loaded with the response's CSP nonce.
(function () {
  "use strict";
  var root = document.querySelector("[data-live-url]");
  if (!root || !window.EventSource || !window.fetch || !window.DOMParser) {
    return;
  }
  var indicator = document.getElementById("live-status");
  var busy = false;
  var again = false;

  function say(text, tone) {
    if (indicator) {
      indicator.textContent = text;
      indicator.className = "live " + tone;
    }
  }

  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    fetch(window.location.pathname, { credentials: "same-origin", headers: { accept: "text/html" } })
      .then(function (answer) {
        if (!answer.ok || answer.redirected) {
          throw new Error("status " + answer.status);
        }
        return answer.text();
      })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, "text/html");
        fresh.querySelectorAll("[data-live]").forEach(function (section) {
          var current = document.getElementById(section.id);
          if (current && current.outerHTML !== section.outerHTML) {
            current.replaceWith(document.adoptNode(section));
          }
        });
        document.title = fresh.title;
        say("live · updated " + new Date().toLocaleTimeString(), "on");
      })
      .catch(function () {
        say("live updates paused: reload the page", "off");
      })
      .finally(function () {
        busy = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  var source = new EventSource(root.getAttribute("data-live-url"));
  source.addEventListener("open", function () {
    say("live", "on");
  });
  source.addEventListener("moved", refresh);
  source.addEventListener("signed-out", function () {
    source.close();
    say("signed out: live updates stopped", "off");
  });
  source.addEventListener("error", function () {
    if (source.readyState === EventSource.CLOSED) {
      say("live updates stopped: reload the page", "off");
    } else {
      say("reconnecting…", "off");
    }
  });
})();
