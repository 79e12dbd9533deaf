<?php
// Moodle's CSV grade import, reading a file and matching its rows to users, run in PHP itself. The tests give one
// line on stdin, a file path or {"path": ..., "import": {...}}, and get one JSON line back:
// {"MODE LOCALE": rows, or {"error": Moodle's error string}, ..., "import": {"MODE LOCALE": result, ...}}.
//
// Followed from the sources (read in the public repository moodle/moodle; re-written here, not copied):
//
// * lib/csvlib.class.php at cf29c007d2535bb90d623d0fad76ee8075ced722, class csv_import_reader:
//   load_csv_content($content, $encoding, $delimiter_name, $column_validation = null, $enclosure = '"'): the content
//   converted to UTF-8 (the files are UTF-8 already: nothing to do), its BOM removed (core_text::trim_utf8_bom),
//   "\r\n" and "\r" made "\n", trim()med, written to a temporary file and read back with
//   fgetcsv($fp, 0, $csv_delimiter, $enclosure), the escape argument left out (so PHP's default, the backslash),
//   until it returns false; a row that is one null cell (a blank line) is dropped; no row at all is 'csvemptyfile',
//   and a row whose cell count differs from the header's refuses the whole file ('csvweirdcolumns'). The rows are
//   then stored with csv_export_writer::print_array($columns, ',', '"', true) (add_data: fputcsv with the comma and
//   the quote, the escape left out: the backslash) and read back by get_columns() (the header), init() (skips it)
//   and next() (one row each), each with fgetcsv($fp) and every argument left out. So a file is read twice by PHP:
//   once as uploaded, once as Moodle itself wrote it.
// * grade/import/csv/classes/load_data.php at 0289d8c7665458f8ffc47e34527598e15523f104, class
//   gradeimport_csv_load_data: prepare_import_grade_data walks the rows next() gives with ONE $this->studentid for
//   the whole file (set to null once, before the first row); a row of one cell or none is skipped; each cell is
//   clean_param(PARAM_RAW)ed (lib/moodlelib.php's fix_utf8: NUL bytes and invalid UTF-8 dropped) and trim()med;
//   map_user_data_with_value, for the "map from" column, calls check_user_exists only when the cell is not
//   empty() ("Skip invalid row with blank user field": "" and "0" are PHP's empty strings), so a row whose key is
//   blank or "0" keeps the previous row's user; check_user_exists is $DB->get_record('user', [field => value]),
//   over the whole site's user table (deleted users' rows too, and not only the course's users), and a value that
//   finds no user, or makes the query fail, aborts the whole import ('usermappingerror'); after the row's cells,
//   no user at all aborts it too ('usermappingerrorusernotfound'). A column mapped to "new grade item"
//   (import_new_grade_item) gives a grade of the cell as it is, none for '-' (a blank cell gives an empty grade,
//   taken as none here: the export writes no blank grade); each grade goes through
//   insert_grade_record, which aborts the whole import for a grade above 100 (or $CFG->gradepointmax when the
//   site sets unlimitedgrades: 'gradevaluetoobig').
// * grade/import/grade_import_form.php at b35c36def59dca0eb69ff2408429899a88afd8e4, grade_import_mapping_form: the
//   "Map from" menu is the file's header cells; "Map to" is userid, username, useridnumber (idnumber), useremail,
//   or ignore. check_user_exists maps them to the user's id, username, idnumber and email fields.
// * grade/import/lib.php at 9b77dc8db238e73fec3ee78e5ba296614ccacf6f: grade_import_commit writes every buffered
//   grade, the same user's later row over an earlier one; get_unenrolled_users_in_import then names the users
//   graded who have no graded role in the course (their grades are kept, out of sight).
//
// $DB->get_record is modelled as on PostgreSQL, Moodle's recommended database: a text field equals the value
// exactly; the integer id takes a value PostgreSQL reads as an integer ("0101" is 101) and fails on any other,
// which check_user_exists turns into a mapping error. More than one matching user (idnumber and email are not
// unique in Moodle) gives the first, lowest id, as get_record does with its "found more than one record"
// debugging notice; the result names each such value under "ambiguous". (MySQL's default collations would also
// match a text field whatever its case and trailing spaces.)
//
// MODE is how the upload is read (the stored copy is always read as Moodle reads it): "default" leaves the escape
// argument out, as the source read does (PHP < 9: the backslash; PHP 8.4 deprecates leaving it out), "backslash"
// passes "\\" and "none" passes "" (PHP 9's default; what a Moodle that passes it explicitly may pass). LOCALE is
// LC_ALL while reading: "C", and "C.UTF-8" as Moodle sets its language's UTF-8 locale (moodle_setlocale) and
// fgetcsv steps through a multibyte character by the locale's mblen.
//
// "import" asks for the rows to be imported: {"mapfrom": a header cell, "mapto": "userid" | "username" |
// "useridnumber" | "useremail", "users": [{"id", "username", "idnumber", "email", "enrolled": true}],
// "mapping": {header: "new" or 0 (ignore)} (default: every other column but "First name" and "Last name" to a new
// grade item), "gradepointmax": 100}. A result is {"grades": {user id: {header: grade}}, "rows": [[line, user
// id]], "unenrolled": [user ids], "ambiguous": [values], "error": null} or {"error": Moodle's error string, ...}.
error_reporting(E_ALL);
set_error_handler(function ($no, $message) { fwrite(STDERR, "PHP: $message\n"); return true; });

function read_upload($fp, $mode, $delimiter, $enclosure) {
    if ($mode === 'default') {
        return fgetcsv($fp, 0, $delimiter, $enclosure);
    }
    return fgetcsv($fp, 0, $delimiter, $enclosure, $mode === 'backslash' ? '\\' : '');
}

// csv_import_reader::load_csv_content, then the stored copy as get_columns/init/next give it back.
function moodle_rows($content, $mode, $delimiter = ',', $enclosure = '"') {
    if (substr($content, 0, 3) === "\xef\xbb\xbf") {
        $content = substr($content, 3);
    }
    $content = trim(preg_replace('!\r\n?!', "\n", $content));
    $fp = fopen('php://temp', 'w+b');
    fwrite($fp, $content);
    fseek($fp, 0);
    $columns = array();
    while ($fgetdata = read_upload($fp, $mode, $delimiter, $enclosure)) {
        if (count($fgetdata) != 1 || $fgetdata[0] !== null) {
            $columns[] = $fgetdata;
        }
    }
    fclose($fp);
    if (!isset($columns[0])) {
        return array('error' => 'csvemptyfile');
    }
    foreach ($columns as $rowdata) {
        if (count($rowdata) !== count($columns[0])) {
            return array('error' => 'csvweirdcolumns', 'rows' => $columns);
        }
    }
    // csv_export_writer::print_array: fputcsv with the comma and the quote (the escape left out: "\\", given here
    // so that PHP 8.4 does not warn), then get_columns/init/next: fgetcsv with every argument left out.
    $stored = fopen('php://temp', 'w+b');
    foreach ($columns as $row) {
        fputcsv($stored, $row, ',', '"', '\\');
    }
    fseek($stored, 0);
    $rows = array();
    while (!feof($stored) && ($row = fgetcsv($stored, 0, ',', '"', '\\'))) {
        $rows[] = $row;
    }
    fclose($stored);
    return $rows;
}

function fix_utf8($value) {
    $value = str_replace("\0", '', $value);
    if (preg_match('//u', $value)) {
        return $value;
    }
    $fixed = @iconv('UTF-8', 'UTF-8//IGNORE', $value);
    return $fixed === false ? '' : $fixed;
}

// $DB->get_record('user', [field => value]) on PostgreSQL: [user, ambiguous] or throws.
function get_user_record($users, $field, $value) {
    if ($field === 'id') {
        if (!preg_match('/^\s*[+-]?[0-9]+\s*$/', $value)) {
            throw new Exception("invalid input syntax for type bigint: \"$value\"");
        }
        $found = array_values(array_filter($users, function ($u) use ($value) { return $u['id'] == intval($value); }));
    } else {
        $found = array_values(array_filter($users, function ($u) use ($field, $value) {
            return isset($u[$field]) && (string)$u[$field] === $value;
        }));
    }
    usort($found, function ($a, $b) { return $a['id'] - $b['id']; });
    return array($found ? $found[0] : null, count($found) > 1);
}

// gradeimport_csv_load_data::prepare_import_grade_data on the rows next() gives (header first).
function moodle_import($rows, $ask) {
    $fields = array('userid' => 'id', 'useridnumber' => 'idnumber', 'useremail' => 'email', 'username' => 'username');
    $header = array_map(function ($h) { return fix_utf8(trim($h)); }, $rows[0]);
    $from = array_search($ask['mapfrom'], $header, true);
    if ($from === false) {
        return array('error' => 'no such column to map from: ' . $ask['mapfrom']);
    }
    $map = array();
    foreach ($header as $i => $h) {
        $default = in_array($h, array('First name', 'Last name'), true) ? 0 : 'new';
        $map[$i] = isset($ask['mapping']) && array_key_exists($h, $ask['mapping']) ? $ask['mapping'][$h] : $default;
    }
    $map[$from] = $ask['mapto'];
    $most = isset($ask['gradepointmax']) ? $ask['gradepointmax'] : 100;
    $users = $ask['users'];
    $out = array('grades' => array(), 'rows' => array(), 'unenrolled' => array(), 'ambiguous' => array(),
                 'error' => null);
    $studentid = null;
    foreach (array_slice($rows, 1) as $n => $line) {
        if (count($line) <= 1) {
            continue;
        }
        $newgrades = array();
        foreach ($line as $key => $value) {
            $value = trim(fix_utf8($value));
            $mapping = (string)$map[$key];
            if (isset($fields[$mapping])) {
                if (!empty($value)) {
                    try {
                        list($user, $ambiguous) = get_user_record($users, $fields[$mapping], $value);
                    } catch (Exception $e) {
                        $user = null;
                    }
                    if (!$user) {
                        return array('error' => "usermappingerror: {$fields[$mapping]} \"$value\"") + $out;
                    }
                    if ($ambiguous) {
                        $out['ambiguous'][] = $value;
                    }
                    $studentid = $user['id'];
                }
            } elseif ($mapping === 'new') {
                if ($value !== '' && $value != '-') {
                    $newgrades[$header[$key]] = $value;
                }
            }
        }
        if (empty($studentid) || !is_numeric($studentid)) {
            return array('error' => 'usermappingerrorusernotfound') + $out;
        }
        foreach ($newgrades as $item => $grade) {
            if ($grade > $most) {
                return array('error' => "gradevaluetoobig: $most") + $out;
            }
            $out['grades'][(string)$studentid][$item] = $grade;
        }
        $out['rows'][] = array($n + 1, (string)$studentid);
    }
    foreach ($users as $u) {
        if (isset($out['grades'][(string)$u['id']]) && empty($u['enrolled'])) {
            $out['unenrolled'][] = (string)$u['id'];
        }
    }
    if (!$out['grades']) {
        $out['grades'] = new stdClass();  // {} in JSON
    }
    return $out;
}

$locales = array('C' => 'C', 'C.UTF-8' => 'C.UTF-8');
while (($line = fgets(STDIN)) !== false) {
    $line = rtrim($line, "\n");
    $asked = substr($line, 0, 1) === '{' ? json_decode($line, true) : array('path' => $line);
    $content = file_get_contents($asked['path']);
    $out = array();
    foreach ($locales as $name => $locale) {
        if (setlocale(LC_ALL, $locale) === false) {
            $out["locale $name"] = array('error' => "no locale $locale on this machine");
            continue;
        }
        foreach (array('default', 'backslash', 'none') as $mode) {
            $rows = moodle_rows($content, $mode);
            $out["$mode $name"] = $rows;
            if (isset($asked['import'])) {
                $out['import']["$mode $name"] = isset($rows['error']) ? $rows : moodle_import($rows, $asked['import']);
            }
        }
    }
    echo json_encode($out, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES), "\n";
    flush();
}
