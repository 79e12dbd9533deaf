// The course's JupyterLab plugins on the hub (coursekit/hub.py puts this folder on each user's JUPYTER_PATH).
// Written by hand as a module-federation container (what `jupyter labextension build` would emit), since it needs
// no shared module: only the application's command registry and its contents service.
//
// 1. "nbgrader:open-formgrader" (Nbgrader > Formgrader) opens the formgrader in a browser tab of its own. A hub's
//    single-user servers forbid being framed (Content-Security-Policy frame-ancestors 'none': every user's server
//    shares the hub's origin), so nbgrader's own command, which frames it inside the lab, shows "refused to
//    connect". The instructor's lab disables nbgrader's formgrader plugin and this one registers the command.
// 2. "(view feedback)" in the Assignments tab moves the file browser to the feedback's folder
//    (filebrowser:go-to-path); here the page in that folder is then opened in the lab's HTML viewer.
var _JUPYTERLAB;
(function () {
  "use strict";
  var NAME = "@attention-course/hub-lab";

  function baseUrl() {
    var el = document.getElementById("jupyter-config-data");
    var data = el ? JSON.parse(el.textContent || "{}") : {};
    var base = data.baseUrl || "/";
    return base.charAt(base.length - 1) === "/" ? base : base + "/";
  }

  var formgrader = {
    id: NAME + ":formgrader-tab",
    description: "Opens the formgrader in a browser tab of its own (a hub's servers may not be framed).",
    autoStart: true,
    activate: function (app) {
      var id = "nbgrader:open-formgrader";
      if (app.commands.hasCommand(id)) {
        return; // nbgrader's own plugin is active (not on the hub): leave its command as it is
      }
      app.commands.addCommand(id, {
        label: "Formgrader",
        caption: "Open the formgrader in a new browser tab",
        execute: function () {
          window.open(baseUrl() + "formgrader", "_blank");
        }
      });
    }
  };

  var FEEDBACK_FOLDER = /(^|\/)feedback\/[^\/]+\/?$/;

  var feedback = {
    id: NAME + ":view-feedback",
    description: "Opens the feedback page when the Assignments tab's '(view feedback)' goes to its folder.",
    autoStart: true,
    activate: function (app) {
      app.commands.commandExecuted.connect(function (_, executed) {
        var path = executed.args && executed.args.path;
        if (executed.id !== "filebrowser:go-to-path" || typeof path !== "string" || !FEEDBACK_FOLDER.test(path)) {
          return;
        }
        app.serviceManager.contents.get(path, { content: true }).then(function (folder) {
          (folder.content || []).forEach(function (item) {
            if (item.type === "file" && /\.html$/.test(item.name)) {
              app.commands.execute("docmanager:open", { path: item.path, factory: "HTML Viewer" });
            }
          });
        });
      });
    }
  };

  var module = { __esModule: true, default: [formgrader, feedback] };
  var container = {
    init: function () { return Promise.resolve(); },
    get: function (request) {
      if (request === "./extension" || request === "./index") {
        return Promise.resolve(function () { return module; });
      }
      return Promise.reject(new Error("Module " + request + " does not exist in container " + NAME + "."));
    }
  };
  _JUPYTERLAB = window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB[NAME] = container;
})();
