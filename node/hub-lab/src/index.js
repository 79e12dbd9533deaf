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
// 5. The Assignments tab, for a student on the hub: under each assignment, their due date (their extension
//    included) and the course's late policy, as the student's server has them from the hub's grading service
//    (<base>course/due, learner/lab_server.py); and beside each downloaded assignment's Submit, "Fresh copy"
//    (<base>course/fetch-again: `course fetch-again`, their folder moved aside, never deleted), which says in a
//    notification where their folder went. A server without these routes (one machine, an instructor) shows neither.
//    Beside Submit, Progress puts the learner's progress in it under the assignment (<base>course/progress: `course
//    progress`, which runs their answer cells, so only when asked), and
//    Nbgrader > Your Progress opens the whole course's (<base>course/progress.html, a page with no script); under
//    each submitted assignment, what was returned (<base>course/returned: the fetched feedback's score and the
//    parts that lost points).
// 6. Nbgrader > Extension... in an instructor's lab: `course extend` for some students (<base>course/extend,
//    coursekit/hub/formgrader_tab.py), what it did or why not in a notification.
// Its style (style/index.css) wraps the long lines of nbgrader's Validate dialog.
import { Dialog, InputDialog, Notification, showDialog } from '@jupyterlab/apputils';
import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { IHTMLViewerTracker } from '@jupyterlab/htmlviewer';
import { IMainMenu } from '@jupyterlab/mainmenu';
import { ServerConnection } from '@jupyterlab/services';

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

// ------------------------------------------------------------------ 5. the Assignments tab: due dates, a fresh copy
// a JSON request to this server (its login and XSRF check, as every request of the lab); the answer, or null when
// the server has no such route (404) or cannot be reached
async function askServer(path, init) {
  const settings = ServerConnection.makeSettings();
  try {
    const response = await ServerConnection.makeRequest(URLExt.join(settings.baseUrl, path), init || {}, settings);
    return response.ok ? await response.json() : null;
  } catch (err) {
    return null;
  }
}

// whether this server is a student's with the course's routes (learner/lab_server.py): a GET of a POST-only route
// is refused with 405 there, 404 elsewhere; asked once
let studentServer = null;

function isStudentServer() {
  if (!studentServer) {
    const settings = ServerConnection.makeSettings();
    studentServer = ServerConnection.makeRequest(URLExt.join(settings.baseUrl, 'course/fetch-again'), {}, settings)
      .then(response => response.status === 405, () => false);
  }
  return studentServer;
}

const LISTS = ['released_assignments_list', 'fetched_assignments_list', 'submitted_assignments_list'];

// each top row of the tab's lists: {row, list, course, assignment}
function assignmentRows() {
  const rows = [];
  LISTS.forEach(list => {
    document.querySelectorAll(`#${list} > .list_item`).forEach(row => {
      const name = row.querySelector('.item_name');
      const course = row.querySelector('.item_course');
      if (name && !row.classList.contains('nested_list_item')) {
        rows.push({ row, list, assignment: name.textContent.trim(), course: course ? course.textContent.trim() : '' });
      }
    });
  });
  return rows;
}

function refreshTab() {
  const button = document.getElementById('refresh_assignments_list');
  if (button) {
    button.click();
  }
}

async function freshCopy(course, assignment) {
  const asked = await showDialog({
    title: `A fresh copy of ${assignment}?`,
    body: `Your folder ${assignment} is moved aside (renamed, with the time), nothing in it deleted, and the ` +
      'assignment as released is fetched in its place.',
    buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Fresh copy' })]
  });
  if (!asked.button.accept) {
    return;
  }
  const answer = await askServer('course/fetch-again', {
    method: 'POST', body: JSON.stringify({ course_id: course, assignment_id: assignment })
  });
  if (answer && answer.success) {
    Notification.success((answer.lines || []).join('. '), { autoClose: false });
  } else {
    const why = answer ? answer.message : 'your server did not answer';
    Notification.error(`No fresh copy of ${assignment}: ${why}`, { autoClose: false });
  }
  refreshTab();
}

// the learner's progress (course/progress: `course progress` on their notebooks, again only after a change), when
// they press Progress: one line under the downloaded assignment, its points from the visible checks and what is left
let progressAsked = null;

function progressLine(nb) {
  if (nb.error) {
    return `Your notebook: ${nb.error}`;
  }
  const left = [...nb.exercises, ...nb.questions].filter(i => i.state !== 'passes' && i.state !== 'right');
  return `Your notebook: ${nb.points} / ${nb.max_points} points from the visible checks; ` +
    (left.length ? `to do: ${left.map(i => `${i.name} (${i.state})`).join(', ')}` : 'every check passes') + '.';
}

async function showProgress(row, assignment, button) {
  button.disabled = true;
  button.textContent = 'Checking...';
  if (!progressAsked) {
    progressAsked = askServer('course/progress').finally(() => {
      progressAsked = null;
    });
  }
  const report = await progressAsked;
  button.disabled = false;
  button.textContent = 'Progress';
  const nb = report && (report.notebooks || []).find(n => n.notebook === assignment);
  let line = row.querySelector(':scope > .course-progress');
  if (!line) {
    line = document.createElement('div');
    line.className = 'course-progress col-md-12';
    row.appendChild(line);
  }
  line.textContent = nb ? progressLine(nb) : 'Your progress could not be worked out: open Nbgrader > Your Progress.';
}

// what was returned (course/returned: the newest feedback page fetched into each assignment's folder), one line
// under each submitted assignment: its score and the parts that lost points
let returnedAsked = null;

async function showReturned(row, assignment) {
  if (!returnedAsked) {
    returnedAsked = askServer('course/returned').finally(() => {
      window.setTimeout(() => {
        returnedAsked = null;
      }, 2000);
    });
  }
  const answer = await returnedAsked;
  const got = answer && answer.value && answer.value[assignment];
  if (!got || row.querySelector(':scope > .course-returned')) {
    return;
  }
  const line = document.createElement('div');
  line.className = 'course-returned col-md-12';
  line.textContent = `Returned (${got.time}): ${got.score} / ${got.max_score}; ` +
    (got.lost.length ? `points lost in: ${got.lost.join(', ')}` : 'every point') + '.';
  row.appendChild(line);
}

const assignmentsTab = {
  id: NAME + ':assignments-tab',
  description: 'Shows a student their due dates in the Assignments tab, and a Fresh copy button for a lost notebook.',
  autoStart: true,
  activate: () => {
    // nbgrader makes every row anew when the tab loads or is refreshed: new rows, new due dates (an extension may
    // have come since), asked once for all the rows that appeared together
    const seen = new WeakSet();
    let asking = null;
    const ours = isStudentServer();
    const decorate = async () => {
      const rows = assignmentRows().filter(r => !seen.has(r.row));
      if (!rows.length || !(await ours)) {
        return; // no rows yet, or not a student's server with the course's routes
      }
      rows.forEach(r => seen.add(r.row));
      if (!asking) {
        asking = askServer('course/due').finally(() => {
          asking = null;
        });
      }
      const answer = (await asking) || { value: [] }; // no due dates now: the rest of each row all the same
      const found = new Map();
      (answer.value || []).forEach(course => (course.assignments || []).forEach(a =>
        found.set(`${course.course_id}/${a.assignment_id}`, a)));
      rows.forEach(({ row, list, course, assignment }) => {
        const dates = found.get(`${course}/${assignment}`);
        if (dates && !row.querySelector(':scope > .course-due')) {
          const note = document.createElement('div');
          note.className = 'course-due col-md-12';
          note.textContent = dates.lines.join(' ');
          row.appendChild(note);
        }
        const status = row.querySelector('.item_status');
        if (list === 'submitted_assignments_list') {
          showReturned(row, assignment);
        }
        if (list === 'fetched_assignments_list' && status && !status.querySelector('.course-fresh-copy')) {
          const button = document.createElement('button');
          button.className = 'course-fresh-copy btn btn-default btn-xs';
          button.textContent = 'Fresh copy';
          button.title = 'Move your folder aside (nothing deleted) and fetch the assignment again';
          button.onclick = () => freshCopy(course, assignment);
          status.appendChild(button);
          // the learner's progress runs their answer cells: only when they ask
          const check = document.createElement('button');
          check.className = 'course-progress-button btn btn-default btn-xs';
          check.textContent = 'Progress';
          check.title = 'Run the checks on your answers in this notebook (no training): points so far, what is left';
          check.onclick = () => showProgress(row, assignment, check);
          status.appendChild(check);
        }
      });
    };
    let pending = false;
    new MutationObserver(() => {
      if (!pending) {
        pending = true;
        window.setTimeout(() => {
          pending = false;
          decorate().catch(err => console.error(err));
        }, 200);
      }
    }).observe(document.body, { childList: true, subtree: true });
  }
};

// the whole course's progress, a page of the student's server with no script, in a browser tab of its own
const progressPage = {
  id: NAME + ':progress-page',
  description: 'Nbgrader > Your Progress: the points of every notebook so far, and what is left.',
  autoStart: true,
  optional: [IMainMenu],
  activate: (app, mainMenu) => {
    addProgressCommand(app, mainMenu).catch(err => console.error(err));
  }
};

async function addProgressCommand(app, mainMenu) {
  if (!(await isStudentServer())) {
    return; // not a student's server with the course's routes
  }
  const id = 'course:progress';
  app.commands.addCommand(id, {
    label: 'Your Progress',
    caption: 'Every notebook\'s checks on your answers (no training): points so far and what is left',
    execute: () => window.open(URLExt.join(PageConfig.getBaseUrl(), 'course', 'progress.html'), '_blank')
  });
  await app.restored;
  const menu = mainMenu && mainMenu.menus.find(m => m.id === 'jp-mainmenu-nbgrader');
  if (menu) {
    menu.addItem({ command: id });
  }
}

// ------------------------------------------------------------------ 6. an extension from the lab
const extension = {
  id: NAME + ':extension',
  description: 'Nbgrader > Extension...: `course extend` for some students, from an instructor\'s lab.',
  autoStart: true,
  optional: [IMainMenu],
  activate: (app, mainMenu) => {
    // not awaited: the lab restores its layout only once every plugin's activate has returned
    addExtensionCommand(app, mainMenu).catch(err => console.error(err));
  }
};

async function addExtensionCommand(app, mainMenu) {
  // only an instructor's server has the route (a GET is refused with 405 there, 404 elsewhere)
  const settings = ServerConnection.makeSettings();
  let status = 404;
  try {
    status = (await ServerConnection.makeRequest(URLExt.join(settings.baseUrl, 'course/extend'), {}, settings)).status;
  } catch (err) {
    return;
  }
  if (status !== 405) {
    return;
  }
  const id = 'course:extend';
  app.commands.addCommand(id, {
    label: 'Extension...',
    caption: 'A later due date for some students (course extend)',
    execute: async () => {
      const assignments = (await askServer('formgrader/api/assignments')) || [];
      const names = assignments.map(a => a.name).filter(n => n);
      const assignment = await InputDialog.getItem({ title: 'Extension: which assignment?', items: names });
      if (!assignment.button.accept || !assignment.value) {
        return;
      }
      const students = await InputDialog.getText({
        title: `Extension for ${assignment.value}: which students?`, placeholder: 'student ids, separated by spaces'
      });
      if (!students.button.accept) {
        return;
      }
      const until = await InputDialog.getText({
        title: 'Until when?',
        placeholder: '2026-12-10 17:00 (UTC), or +48 for hours past the due date, or remove'
      });
      if (!until.button.accept) {
        return;
      }
      const when = (until.value || '').trim();
      const asked = { assignment: assignment.value, students: (students.value || '').split(/[\s,]+/).filter(s => s) };
      if (when === 'remove') {
        asked.remove = true;
      } else if (when.startsWith('+')) {
        asked.hours = when.slice(1);
      } else {
        asked.until = when;
      }
      const answer = await askServer('course/extend', { method: 'POST', body: JSON.stringify(asked) });
      if (answer && answer.success) {
        Notification.success((answer.lines || []).join('\n'), { autoClose: false });
      } else {
        Notification.error(`No extension given: ${answer ? answer.message : 'the server did not answer'}`,
          { autoClose: false });
      }
    }
  });
  await app.restored;
  const menu = mainMenu && mainMenu.menus.find(m => m.id === 'jp-mainmenu-nbgrader');
  if (menu) {
    menu.addItem({ command: id });
  }
}

export default [formgrader, feedback, submitted, reportLinks, assignmentsTab, progressPage, extension];
