// The course's JupyterLab plugins on the hub. `make proxy` builds this package with JupyterLab's extension builder
// (@jupyter/builder, the one JupyterLab 4.6 is built with) into node/share/jupyter/labextensions, the folder
// coursekit's hub puts on each user's JUPYTER_PATH.
//
// 1. "nbgrader:open-formgrader" (Nbgrader > Formgrader) opens the formgrader in a browser tab of its own. A hub's
//    single-user servers forbid being framed (Content-Security-Policy frame-ancestors 'none': every user's server
//    shares the hub's origin), so nbgrader's own command, which frames it inside the lab, shows "refused to
//    connect". The instructor's lab disables nbgrader's formgrader plugin and this one registers the command.
// 2. "(view feedback)" in the Assignments tab moves the file browser to the feedback's folder
//    (filebrowser:go-to-path); here the page in that folder is then opened in the lab's HTML viewer.
// 3. Submit in the Assignments tab: nbgrader's tab POSTs {course_id, assignment_id} to <base>assignments/submit
//    (nbgrader.server_extensions.assignment_list), which answers {success: true, value: [the assignments, each
//    submitted one with its submissions' timestamps]} or {success: false, value: the traceback}, and says nothing
//    on success. Here the answer to that request is read (a copy of it; nbgrader's tab gets it as it was) and a
//    notification says "<assignment> submitted at <the timestamp nbgrader recorded>", or why it was not.
// 4. The class report's links (`course report`: report/*.html, each page marked <meta name="course-report">) open in
//    the lab. The HTML viewer shows a page in a sandboxed frame whose links load in that frame (it sets
//    <base target="_self">), and a hub's server refuses to be framed (JupyterHub's frame-ancestors 'none'): a score
//    linking to a student's feedback showed "127.0.0.1 refused to connect". A link with target="_blank" is no way
//    out either: the frame may not open a window unless the instructor trusts the file (no allow-popups). Here a
//    click on a report's link to a file of this server opens that file in the lab instead (a page in the HTML
//    viewer, anything else as the lab opens it); every other link, and every other page, is left as it was.
// Its style (style/index.css) wraps the long lines of nbgrader's Validate dialog.
import { Notification } from '@jupyterlab/apputils';
import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { IHTMLViewerTracker } from '@jupyterlab/htmlviewer';

const NAME = '@attention-course/hub-lab';

const formgrader = {
  id: NAME + ':formgrader-tab',
  description: 'Opens the formgrader in a browser tab of its own (a hub\'s servers may not be framed).',
  autoStart: true,
  activate: app => {
    const id = 'nbgrader:open-formgrader';
    if (app.commands.hasCommand(id)) {
      return; // nbgrader's own plugin is active (not on the hub): leave its command as it is
    }
    app.commands.addCommand(id, {
      label: 'Formgrader',
      caption: 'Open the formgrader in a new browser tab',
      execute: () => {
        window.open(URLExt.join(PageConfig.getBaseUrl(), 'formgrader'), '_blank');
      }
    });
  }
};

const FEEDBACK_FOLDER = /(^|\/)feedback\/[^/]+\/?$/;

const feedback = {
  id: NAME + ':view-feedback',
  description: 'Opens the feedback page when the Assignments tab\'s \'(view feedback)\' goes to its folder.',
  autoStart: true,
  activate: app => {
    app.commands.commandExecuted.connect((_, executed) => {
      const path = executed.args && executed.args.path;
      if (executed.id !== 'filebrowser:go-to-path' || typeof path !== 'string' || !FEEDBACK_FOLDER.test(path)) {
        return;
      }
      app.serviceManager.contents.get(path, { content: true }).then(folder => {
        (folder.content || []).forEach(item => {
          if (item.type === 'file' && /\.html$/.test(item.name)) {
            app.commands.execute('docmanager:open', { path: item.path, factory: 'HTML Viewer' });
          }
        });
      });
    });
  }
};

// ------------------------------------------------------------------ 3. the submission's notification
function submitPath() {
  return new URL(URLExt.join(PageConfig.getBaseUrl(), 'assignments', 'submit'), window.location.href).pathname;
}

// whether a request is the Assignments tab's submit (a POST to <base>assignments/submit)
function isSubmit(input, init) {
  try {
    const request = input instanceof Request ? input : null;
    const method = String((init && init.method) || (request ? request.method : 'GET')).toUpperCase();
    const url = new URL(request ? request.url : String(input), window.location.href);
    return method === 'POST' && url.pathname === submitPath();
  } catch (err) {
    return false; // not a request this plugin reads; fetch itself answers it as it would
  }
}

// {course_id, assignment_id} of a submit's body, or null
async function submission(request, init) {
  let body = init && init.body;
  if (body === undefined && request) {
    body = await request.text();
  }
  try {
    const asked = JSON.parse(String(body));
    return typeof asked.assignment_id === 'string' ? asked : null;
  } catch (err) {
    return null;
  }
}

// "2026-12-07 04:20:13.123456 UTC" (nbgrader's timestamp) to the second: "2026-12-07 04:20:13 UTC"
function toSecond(timestamp) {
  return String(timestamp).replace(/(\d\d:\d\d:\d\d)\.\d+/, '$1');
}

// the last line of a Python traceback, without the error's module path ("ExchangeError: ...")
function lastLine(text) {
  const lines = String(text || '').split('\n').map(line => line.trim()).filter(line => line);
  const last = lines.length ? lines[lines.length - 1] : 'no reason given';
  return last.replace(/^(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_]\w*(?::|$))/, '');
}

function latestTimestamp(answer, asked) {
  const entry = (Array.isArray(answer.value) ? answer.value : []).find(
    a => a.status === 'submitted' && a.assignment_id === asked.assignment_id &&
      (!asked.course_id || a.course_id === asked.course_id)
  );
  const stamps = ((entry && entry.submissions) || []).map(s => s.timestamp).filter(t => t).sort();
  return stamps.length ? stamps[stamps.length - 1] : null;
}

async function tell(asked, response) {
  const name = asked.assignment_id;
  let answer;
  try {
    answer = await response.json();
  } catch (err) {
    answer = null;
  }
  if (!response.ok) {
    const why = (answer && answer.message) || `${response.status} ${response.statusText}`;
    Notification.error(`${name} was not submitted: ${why}`, { autoClose: false });
  } else if (!answer || answer.success !== true) {
    Notification.error(`${name} was not submitted: ${lastLine(answer && answer.value)}`, { autoClose: false });
  } else {
    const stamp = latestTimestamp(answer, asked);
    const when = stamp ? toSecond(stamp) : new Date().toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
    Notification.success(`${name} submitted at ${when}`, { autoClose: 10000 });
  }
}

const submitted = {
  id: NAME + ':submit-notification',
  description: 'Says in a notification that an assignment the Assignments tab submitted was submitted, and when, or why not.',
  autoStart: true,
  activate: () => {
    const fetch = window.fetch;
    // nbgrader's tab sends its request with ServerConnection.makeRequest, whose settings take the page's fetch when
    // they are made (for each request): every request passes through here unchanged, only the answer to a submit is
    // read, from a copy
    window.fetch = function (input, init) {
      if (!isSubmit(input, init)) {
        return fetch.call(window, input, init);
      }
      const asking = submission(input instanceof Request ? input.clone() : null, init).catch(() => null);
      return fetch.call(window, input, init).then(
        response => {
          const copy = response.clone();
          asking.then(asked => asked && tell(asked, copy)).catch(err => console.error(err));
          return response;
        },
        err => {
          asking.then(asked => {
            if (asked) {
              Notification.error(`${asked.assignment_id} was not submitted: ${err.message || err}`, { autoClose: false });
            }
          });
          throw err;
        }
      );
    };
  }
};

// ------------------------------------------------------------------ 4. the class report's links
const REPORT_PAGE = 'meta[name="course-report"]';

// the path (as the lab's file browser names it) of a link to a file this server serves (<base>files/...), or null
function servedPath(href) {
  try {
    const files = new URL(URLExt.join(PageConfig.getBaseUrl(), 'files/'), window.location.href);
    const url = new URL(href, window.location.href);
    if (url.origin !== files.origin || !url.pathname.startsWith(files.pathname)) {
      return null;
    }
    const path = url.pathname.slice(files.pathname.length).split('/').map(decodeURIComponent).join('/');
    return path && !path.split('/').includes('..') ? path : null;
  } catch (err) {
    return null; // not a link this plugin opens; the frame does with it what it would
  }
}

const watched = new WeakSet();

function openReportLinks(app, viewer) {
  const frame = viewer.content.node.querySelector('iframe');
  if (!frame) {
    return;
  }
  const watch = () => {
    let page = null;
    try {
      page = frame.contentDocument;
    } catch (err) {
      return; // not this origin's document (the frame was sent elsewhere)
    }
    if (!page || watched.has(page) || !page.querySelector(REPORT_PAGE)) {
      return;
    }
    watched.add(page);
    page.addEventListener('click', event => {
      const link = event.target && event.target.closest ? event.target.closest('a[href]') : null;
      const path = link && !event.defaultPrevented ? servedPath(link.href) : null;
      if (path === null) {
        return;
      }
      event.preventDefault();
      app.commands.execute('docmanager:open', /\.html?$/i.test(path) ? { path, factory: 'HTML Viewer' } : { path });
    });
  };
  frame.addEventListener('load', watch); // the viewer loads each rendering as a new document
  watch();
}

const reportLinks = {
  id: NAME + ':report-links',
  description: 'Opens the class report\'s links (a student\'s feedback, another order of a table) in the lab.',
  autoStart: true,
  requires: [IHTMLViewerTracker],
  activate: (app, viewers) => {
    viewers.forEach(viewer => openReportLinks(app, viewer));
    viewers.widgetAdded.connect((_, viewer) => openReportLinks(app, viewer));
  }
};

export default [formgrader, feedback, submitted, reportLinks];
