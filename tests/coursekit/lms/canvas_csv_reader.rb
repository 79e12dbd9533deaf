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

$stdout.sync = true
$stdin.each_line do |path|
  text = File.read(path.chomp, mode: "r:bom|utf-8")
  canvas = {
    converters: CANVAS_CONVERTERS.values,
    skip_lines: /^[;, ]*$/,
    col_sep: semicolon_delimited?(text) ? ";" : ",",
    headers: false,
  }
  puts JSON.generate({ "plain" => read(text), "canvas" => read(text, **canvas) })
end
