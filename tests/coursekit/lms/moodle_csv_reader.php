<?php
// Moodle's CSV grade import reading a file, with PHP's own fgetcsv: the tests give one file path a line on stdin and
// get one JSON line back, {"MODE LOCALE": rows, or {"error": Moodle's error string}}.
//
// It follows moodle lib/csvlib.class.php, class csv_import_reader, method load_csv_content, as grade/import/csv
// (classes/load_data.php, load_csv_content) calls it with the comma separator and the default enclosure '"':
// the content converted to UTF-8 (core_text::convert; the files are UTF-8 already, so nothing is done here), the
// UTF-8 BOM removed, "\r\n" and "\r" made "\n", the content trim()med, written to a temporary file and read back
// with fgetcsv($fp, 0, $csv_delimiter, $enclosure) until it returns false; a row that is one null cell (a blank
// line) is dropped, and a file whose rows do not all have the header's number of cells is refused
// ('csvweirdcolumns'). Written from memory of Moodle's source, not copied from a checkout.
//
// MODE is how the escape character is given: "default" leaves it out as Moodle 4.x does (PHP < 9 then uses "\\";
// PHP 8.4 deprecates leaving it out), "backslash" passes "\\" and "none" passes "" (PHP 9's default; what a Moodle
// that passes it explicitly may pass). LOCALE is LC_ALL while reading: "C", and "C.UTF-8" as Moodle sets its
// language's locale (moodle_setlocale; en's is en_AU.UTF-8) and fgetcsv steps through a multibyte character by
// the locale's mblen.
error_reporting(E_ALL);
set_error_handler(function ($no, $message) { fwrite(STDERR, "PHP: $message\n"); return true; });

function moodle_rows($content, $mode, $delimiter = ',', $enclosure = '"') {
    if (substr($content, 0, 3) === "\xef\xbb\xbf") {  // core_text::trim_utf8_bom
        $content = substr($content, 3);
    }
    $content = preg_replace('!\r\n?!', "\n", $content);
    $content = trim($content);
    $fp = fopen('php://temp', 'w+b');
    fwrite($fp, $content);
    fseek($fp, 0);
    $columns = array();
    while (true) {
        if ($mode === 'default') {
            $fgetdata = fgetcsv($fp, 0, $delimiter, $enclosure);
        } else {
            $fgetdata = fgetcsv($fp, 0, $delimiter, $enclosure, $mode === 'backslash' ? '\\' : '');
        }
        if (!$fgetdata) {
            break;
        }
        if (count($fgetdata) == 1) {
            if ($fgetdata[0] !== null) {
                $columns[] = $fgetdata;
            }
        } else {
            $columns[] = $fgetdata;
        }
    }
    fclose($fp);
    if (!isset($columns[0])) {
        return array('error' => 'csvemptyfile');
    }
    $col_count = count($columns[0]);
    foreach ($columns as $value) {
        if (count($value) != $col_count) {
            return array('error' => 'csvweirdcolumns', 'rows' => $columns);
        }
    }
    return $columns;
}

$locales = array('C' => 'C', 'C.UTF-8' => 'C.UTF-8');
while (($path = fgets(STDIN)) !== false) {
    $content = file_get_contents(rtrim($path, "\n"));
    $out = array();
    foreach ($locales as $name => $locale) {
        if (setlocale(LC_ALL, $locale) === false) {
            $out["locale $name"] = array('error' => "no locale $locale on this machine");
            continue;
        }
        foreach (array('default', 'backslash', 'none') as $mode) {
            $out["$mode $name"] = moodle_rows($content, $mode);
        }
    }
    echo json_encode($out, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES), "\n";
    flush();
}
