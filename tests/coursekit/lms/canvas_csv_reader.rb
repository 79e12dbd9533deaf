# Ruby's CSV reading a file, plainly and as Canvas's gradebook importer reads it: the tests give one file path a
# line on stdin and get one JSON line back, {"plain": rows, "canvas": rows} (or {"error": the parser's message}).
#
# "canvas" uses the CSV options of canvas-lms app/models/gradebook_importer.rb (GradebookImporter#csv_stream and the
# converters defined at the top of the class), written here from memory of that file, not copied from a checkout:
# converters :nil (a nil cell stays nil) and :decimal_comma_to_period (a cell that is a number with commas as
# decimal separators, /^-?[0-9.,]+%?$/, has its commas made periods), skip_lines /^[;, ]*$/, headers false, and
# col_sep ";" when the first line holds semicolons and at least as many as commas (semicolon_delimited?), else ",".
require "csv"
require "json"

CANVAS_CONVERTERS = {
  nil: ->(e) { e },
  decimal_comma_to_period: ->(field) { /^-?[0-9.,]+%?$/.match?(field) ? field.tr(",", ".") : field },
}

def semicolon_delimited?(text)
  first_line = text.lines.first.to_s
  return false if first_line.strip.empty?

  semicolons = first_line.count(";")
  semicolons > 0 && semicolons >= first_line.count(",")
end

def read(text, **options)
  CSV.parse(text, **options)
rescue CSV::MalformedCSVError => e
  { "error" => e.message }
end

# GradebookImporter's matching of the rows read with those options to the course's current students ("users": id,
# name, sortable_name, sis_user_id, login), from memory of the same file: the header must have /Student/ in its first
# cell and /ID/ in its second (row_has_student_headers?); the columns up to "Section" are the student's, the rest
# assignments; a row whose first cell holds "Points Possible" is no student. process_student takes the row's user by
# ID (the cell's to_i, when present) among the course's students, else by the pseudonym whose SIS user id, else
# whose login id, is the cell, else the first student whose name or sortable name is the Student cell, else a new,
# "missing" student. Returns {user id, or "missing: NAME" => {assignment => cell}}.
def canvas_import(rows, users)
  header = rows.first
  raise "no student headers" unless header.length > 3 && header[0].to_s =~ /Student/ && header[1].to_s =~ /ID/

  sis_user = header.index { |h| h.to_s =~ /SIS\s+User\s+ID/ }
  sis_login = header.index { |h| h.to_s =~ /SIS\s+Login\s+ID/ }
  last_student_column = header.index { |h| h.to_s =~ /Section/ } || 3
  assignments = header.each_index.select { |i| i > last_student_column }
  by_id = users.to_h { |u| [u["id"], u] }
  imported = {}
  rows.drop(1).each do |row|
    next if row[0].to_s =~ /Points Possible/

    student = by_id[row[1].to_s.to_i] if row[1].to_s.strip != ""
    student ||= users.find { |u| u["sis_user_id"] == row[sis_user] } if sis_user && row[sis_user].to_s.strip != ""
    student ||= users.find { |u| u["login"] == row[sis_login] } if sis_login && row[sis_login].to_s.strip != ""
    student ||= users.find { |u| u["name"] == row[0] || u["sortable_name"] == row[0] }
    key = student ? student["id"].to_s : "missing: #{row[0]}"
    imported[key] = assignments.to_h { |i| [header[i], row[i]] }
  end
  imported
end

$stdout.sync = true
$stdin.each_line do |line|
  asked = line.start_with?("{") ? JSON.parse(line) : { "path" => line.chomp }
  text = File.read(asked["path"], mode: "r:bom|utf-8")
  canvas = {
    converters: CANVAS_CONVERTERS.values,
    skip_lines: /^[;, ]*$/,
    col_sep: semicolon_delimited?(text) ? ";" : ",",
    headers: false,
  }
  out = { "plain" => read(text), "canvas" => read(text, **canvas) }
  out["imported"] = canvas_import(out["canvas"], asked["users"]) if asked["users"] && out["canvas"].is_a?(Array)
  puts JSON.generate(out)
end
