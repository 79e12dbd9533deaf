# Canvas's gradebook import, reading a file and matching its rows to the course's students, in Ruby's own CSV. The
# tests give one line on stdin, a file path or {"path": ..., "users": [...]}, and get one JSON line back:
# {"plain": rows, "canvas": rows} (or {"error": the parser's message} for either), and with "users", "imported".
#
# Followed from canvas-lms lib/gradebook_importer.rb, class GradebookImporter, at commit
# 00b222d77ee43d046e6aee0347c4ed5b27e1741f of the public repository instructure/canvas-lms (re-written here, not
# copied; the file is lib/, not app/models/):
#
# * csv_stream: CSV.foreach on the uploaded file with converters %i[nil decimal_comma_to_period], skip_lines
#   /^[;, ]+$/ and col_sep ";" when semicolon_delimited?, else ",". The converters are Canvas's own, defined at the
#   top of the class: :nil gives every field back as it is; :decimal_comma_to_period takes a field that is all
#   digits, commas and periods (/^-?[0-9.,]+%?$/), splits it at every comma and period, and joins the parts before
#   the last with nothing and the last after a period ("1,5" is "1.5", "1.234,5" is "1234.5", "5." is "5", "," is
#   nil). It is applied to every field, quoted or not, the ID and SIS cells too.
# * semicolon_delimited? and identify_delimiter: the file's first three lines (File#readline: lines, not rows),
#   each parsed alone by CSV.parse_line with ";" and with ","; a separator counts the fields of the first line when
#   every line gives that many (else 0, and 0 when a line is malformed with it); ";" when its count is the larger.
# * check_for_non_student_row: the first row is the header (process_header); a row whose first cell includes
#   "Points Possible" is the points row; a row whose non-nil cells all match /^\s*(Muted|Manual Posting.*)?\s*$/i is
#   skipped; any other row is a student's.
# * process_header / header? / row_has_student_headers? / update_column_count: the header has more than 3 cells,
#   its first includes "Student" and its second "ID"; "SIS User ID" and "SIS Login ID" (third and fourth) make the
#   student columns 5 (an "Integration ID" and a "Root Account" after them, more); the last student column must
#   include "Section". strip_non_assignment_columns drops the student columns and every column whose title holds
#   Current Score, Current Points, Current Grade, Final Score, Final Points, Final Grade, Override Score, Override
#   Grade or Override Status; each other column is an assignment (parse_assignments: Assignment.title_and_id reads
#   "Title (123)" as the assignment of id 123, else it goes by title, else a new one), found at the first column of
#   its title (calc_assignment_indices: original_header_row.index).
# * process_student: the ID cell (row[1]) when present? (not blank) finds, by its to_i, a student of
#   @context.all_students; else the course's root account's active pseudonyms of those students, by SIS user id,
#   then by login id (unique_id), each cell as read; else the first of those students whose name or sortable name
#   is the Student cell (name = row[0], compared with ==: an empty cell, nil, is no user's name); else a new user,
#   a "missing" student the instructor must resolve by hand ("missing: NAME" here). A student removed from the
#   course is not among all_students, so their row falls through to the name.
# * process_submissions: the grade is the assignment's cell, strip()ped.
# * parse! at the end ("remove concluded enrollments"): a student matched who is in all_students but not among the
#   course's gradable_students is dropped from the import (named under "dropped" here).
#
# all_students and gradable_students are app/models/course.rb's (a stored copy of a recent canvas-lms, whose commit
# the index did not give): all_student_enrollments are the student enrolments whose workflow_state is not
# 'deleted'; gradable_student_enrollments those whose workflow_state is 'active' or 'inactive'. So an inactive
# student is imported, and a concluded (completed), invited or pending one is found and dropped.
#
# "users" are the course's students: {"id", "name", "sortable_name", "sis_user_id", "login", "gradable": true};
# a student removed from the course (enrolment deleted) is not among them. "imported" is {user id, or "missing:
# NAME": {assignment title: grade}} (a later row for the same user replaces an earlier one, as the importer's
# per-student hash does); "rows" is [[row number, user id or "missing: NAME", how: "id" | "sis_user_id" |
# "sis_login_id" | "name" | "missing"]]; "assignments" is {title: Canvas assignment id, or "new"}.
require "csv"
require "json"

Encoding.default_external = Encoding::UTF_8  # as Rails sets it (config.encoding), whatever this machine's locale

# Canvas's two converters, registered under its names and given by name as csv_stream gives them.
CSV::Converters[:nil] = ->(field) { field }
CSV::Converters[:decimal_comma_to_period] = lambda do |field|
  next field unless field.is_a?(String) && /^-?[0-9.,]+%?$/.match?(field)

  parts = field.split(/[,.]/)
  last = parts.pop
  parts.empty? ? last : "#{parts.join}.#{last}"
end

def field_count(lines, separator)
  counts = lines.map { |line| CSV.parse_line(line, col_sep: separator)&.size || 0 }
  counts.uniq.size == 1 ? counts.first : 0
rescue CSV::MalformedCSVError
  0
end

def semicolon_delimited?(path)
  first_lines = []
  File.open(path) do |f|
    first_lines << f.readline while !f.eof? && first_lines.size < 3
  end
  return false if first_lines.empty?

  field_count(first_lines, ";") > field_count(first_lines, ",")
end

def read(path, **options)
  CSV.foreach(path, **options).to_a
rescue CSV::MalformedCSVError => e
  { "error" => e.message }
end

def blank?(value)
  value.nil? || (value.is_a?(String) && /\A[[:space:]]*\z/.match?(value))
end

NON_ASSIGNMENT = Regexp.new(["Current Score", "Current Points", "Current Grade", "Final Score", "Final Points",
                             "Final Grade", "Override Score", "Override Grade", "Override Status"].join("|"))

def student_columns(header)
  raise "Invalid header row" unless header.length > 3 && header[0].to_s.include?("Student") &&
                                    header[1].to_s.include?("ID")

  columns, sis_user, sis_login = 3, nil, nil
  if /SIS\s+Login\s+ID/.match?(header[2])
    sis_login = 2
    columns += 1
  elsif header[2] =~ /SIS\s+User\s+ID/ && header[3] =~ /SIS\s+Login\s+ID/
    extra = /Integration\s+ID/.match?(header[4]) ? 1 : 0
    sis_user, sis_login = 2, 3
    columns += 2 + extra
    columns += 1 if /Root\s+Account/.match?(header[4 + extra])
  end
  raise "Invalid header row" unless header[columns - 1].to_s.include?("Section")

  [columns, sis_user, sis_login]
end

# A Canvas user's name and sortable name are never nil: app/models/user.rb (same commit) infer_defaults, before a
# user is saved, sets name ||= email || "User" and sortable_name from the name when it has none, and the
# sortable_name reader falls back to User.last_name_first(name). (Its empty Student cell Ruby reads as nil.)
def name_of(user)
  user["name"] || user["email"] || "User"
end

def sortable_name_of(user)
  user["sortable_name"] || name_of(user)
end

def title_and_id(title)
  title =~ /\A(.*)\s\((\d+)\)\z/ ? [$1, $2] : [title, nil]
end

def canvas_import(rows, users, course_assignments)
  header = rows.first
  columns, sis_user, sis_login = student_columns(header)
  titles = header.drop(columns).grep_v(NON_ASSIGNMENT)
  assignments = titles.to_h do |title|
    _, id = title_and_id(title)
    found = course_assignments.find { |a| a["id"] == id.to_i } if id
    found ||= course_assignments.find { |a| a["title"] == title }
    [title, found ? found["id"] : "new"]
  end
  students = users.to_h { |u| [u["id"], u] }
  by_sis = users.select { |u| u["sis_user_id"] }.to_h { |u| [u["sis_user_id"], u] }
  by_login = users.select { |u| u["login"] }.to_h { |u| [u["login"], u] }
  imported, matched, dropped = {}, [], []
  rows.drop(1).each_with_index do |row, n|
    next if row[0]&.include?("Points Possible")
    next if row.compact.all? { |cell| cell =~ /^\s*(Muted|Manual Posting.*)?\s*$/i }

    student, how = students[row[1].to_i], "id" unless blank?(row[1])
    student, how = by_sis[row[sis_user]], "sis_user_id" if !student && sis_user && !blank?(row[sis_user])
    student, how = by_login[row[sis_login]], "sis_login_id" if !student && sis_login && !blank?(row[sis_login])
    student, how = users.find { |u| name_of(u) == row[0] || sortable_name_of(u) == row[0] }, "name" unless student
    key = student ? student["id"].to_s : "missing: #{row[0]}"
    how = "missing" unless student
    if student && student.fetch("gradable", true) == false
      dropped << key
      next
    end
    matched << [n + 1, key, how]
    imported[key] = titles.to_h { |title| [title, row[header.index(title)]&.strip] }
  end
  { "imported" => imported, "rows" => matched, "dropped" => dropped, "assignments" => assignments }
end

$stdout.sync = true
$stdin.each_line do |line|
  asked = line.start_with?("{") ? JSON.parse(line) : { "path" => line.chomp }
  path = asked["path"]
  canvas = {
    converters: %i[nil decimal_comma_to_period],
    skip_lines: /^[;, ]+$/,
    col_sep: semicolon_delimited?(path) ? ";" : ",",
  }
  out = { "plain" => read(path), "canvas" => read(path, **canvas) }
  if asked["users"] && out["canvas"].is_a?(Array)
    out.update(canvas_import(out["canvas"], asked["users"], asked["assignments"] || []))
  end
  puts JSON.generate(out)
end
