// The rename cases of `waferline eval-nes` for Java, found by javac's own attribution (the compiler tree API,
// com.sun.source), independently of the tree-sitter code under test (server/features/next_edit/lexical_java_c.py):
//
//	java benchmarks/nes_java_renames.java FILE...   (a JDK 17: the source launcher compiles this file itself)
//
// The files are parsed and attributed together, as one compilation (imports the files do not hold are errors,
// counted). For each variable a method, constructor, lambda, initializer block or their nested classes declare
// (javac's element kinds PARAMETER: kind "parameter"; LOCAL_VARIABLE, EXCEPTION_PARAMETER, RESOURCE_VARIABLE,
// BINDING_VARIABLE: "local"), the candidate's locations are every identifier javac resolves to that element
// (`Trees.getElement` of an IdentifierTree; a field access `x.f` is a MemberSelectTree, never one). The declaration's
// name is found in the text after its type (its first whole-word occurrence in the declaration). A candidate is left
// out when its method holds a compile error (the attribution there may be lost), when an identifier of that name in
// its method resolves to nothing, or when a use comes before the declaration. Printed, one JSON line a file:
// {file, skipped, candidates: [{kind, name, start, locations}]}, offsets in chars (UTF-16 units: javac's).
// Mentions in comments and strings are not edits. benchmarks/nes_cases_declared.py makes the cases.

import com.sun.source.tree.*;
import com.sun.source.util.*;
import java.io.File;
import java.util.*;
import java.util.regex.*;
import javax.lang.model.element.*;
import javax.tools.*;

public class nes_java_renames {
    record Decl(String kind, String name, int start, Element element, long fnStart, long fnEnd, CompilationUnitTree unit) {}

    public static void main(String[] args) throws Exception {
        JavaCompiler compiler = ToolProvider.getSystemJavaCompiler();
        DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
        StandardJavaFileManager fm = compiler.getStandardFileManager(diagnostics, null, null);
        List<File> files = new ArrayList<>();
        for (String a : args) files.add(new File(a).getAbsoluteFile());
        JavacTask task = (JavacTask) compiler.getTask(null, fm, diagnostics,
                List.of("-proc:none", "-Xlint:none", "-implicit:none", "-Xmaxerrs", "100000"), null,
                fm.getJavaFileObjectsFromFiles(files));
        Iterable<? extends CompilationUnitTree> units = task.parse();
        task.analyze();
        Trees trees = Trees.instance(task);
        SourcePositions pos = trees.getSourcePositions();
        Map<String, List<Long>> errors = new HashMap<>();
        for (Diagnostic<? extends JavaFileObject> d : diagnostics.getDiagnostics()) {
            if (d.getKind() == Diagnostic.Kind.ERROR && d.getSource() != null) {
                errors.computeIfAbsent(new File(d.getSource().toUri()).getPath(), k -> new ArrayList<>()).add(d.getPosition());
            }
        }
        int errorCount = errors.values().stream().mapToInt(List::size).sum();
        System.err.println(files.size() + " files, " + errorCount + " compile errors");
        for (CompilationUnitTree unit : units) {
            String path = new File(unit.getSourceFile().toUri()).getPath();
            String text = unit.getSourceFile().getCharContent(true).toString();
            List<Decl> decls = new ArrayList<>();
            Map<Element, List<Long>> uses = new HashMap<>();
            Map<String, Integer> skipped = new TreeMap<>();
            List<long[]> unresolved = new ArrayList<>(); // [position, name hash]
            List<String> unresolvedNames = new ArrayList<>();
            new TreePathScanner<Void, long[]>() {
                @Override
                public Void visitMethod(MethodTree m, long[] fn) {
                    return super.visitMethod(m, new long[] {pos.getStartPosition(unit, m), pos.getEndPosition(unit, m)});
                }

                @Override
                public Void visitBlock(BlockTree b, long[] fn) {
                    if (fn == null) fn = new long[] {pos.getStartPosition(unit, b), pos.getEndPosition(unit, b)};
                    return super.visitBlock(b, fn);
                }

                @Override
                public Void visitVariable(VariableTree v, long[] fn) {
                    Element e = trees.getElement(getCurrentPath());
                    if (e != null && fn != null) {
                        String kind = switch (e.getKind()) {
                            case PARAMETER -> "parameter";
                            case LOCAL_VARIABLE, EXCEPTION_PARAMETER, RESOURCE_VARIABLE, BINDING_VARIABLE -> "local";
                            default -> null;
                        };
                        int at = nameAt(text, v, unit, pos);
                        if (kind != null && at >= 0) decls.add(new Decl(kind, v.getName().toString(), at, e, fn[0], fn[1], unit));
                        else if (kind != null) skipped.merge("declaration's name not found", 1, Integer::sum);
                    }
                    return super.visitVariable(v, fn);
                }

                @Override
                public Void visitIdentifier(IdentifierTree id, long[] fn) {
                    Element e = trees.getElement(getCurrentPath());
                    long at = pos.getStartPosition(unit, id);
                    if (e == null) {
                        unresolved.add(new long[] {at});
                        unresolvedNames.add(id.getName().toString());
                    } else {
                        uses.computeIfAbsent(e, k -> new ArrayList<>()).add(at);
                    }
                    return super.visitIdentifier(id, fn);
                }
            }.scan(unit, null);
            StringBuilder out = new StringBuilder();
            List<Long> fileErrors = errors.getOrDefault(path, List.of());
            List<String> candidates = new ArrayList<>();
            decls.sort(Comparator.comparingInt(Decl::start));
            for (Decl d : decls) {
                if (fileErrors.stream().anyMatch(p -> d.fnStart() <= p && p < d.fnEnd())) {
                    skipped.merge("a compile error in the method", 1, Integer::sum);
                    continue;
                }
                boolean lost = false;
                for (int i = 0; i < unresolved.size(); i++) {
                    long p = unresolved.get(i)[0];
                    if (unresolvedNames.get(i).equals(d.name()) && d.fnStart() <= p && p < d.fnEnd()) lost = true;
                }
                if (lost) {
                    skipped.merge("an identifier of that name resolved to nothing", 1, Integer::sum);
                    continue;
                }
                List<Long> locations = new ArrayList<>(uses.getOrDefault(d.element(), List.of()));
                Collections.sort(locations);
                if (!locations.isEmpty() && locations.get(0) < d.start()) {
                    skipped.merge("a use before the declaration", 1, Integer::sum);
                    continue;
                }
                if (locations.stream().anyMatch(p -> p < 0 || !text.startsWith(d.name(), (int) (long) p))) {
                    skipped.merge("a use's text is not the name", 1, Integer::sum);
                    continue;
                }
                StringBuilder locs = new StringBuilder();
                for (Long p : locations) locs.append(locs.length() == 0 ? "" : ",").append(p);
                candidates.add("{\"kind\":\"" + d.kind() + "\",\"name\":\"" + d.name() + "\",\"start\":" + d.start()
                        + ",\"locations\":[" + locs + "]}");
            }
            out.append("{\"file\":\"").append(path.replace("\\", "\\\\").replace("\"", "\\\"")).append("\",\"skipped\":{");
            int i = 0;
            for (Map.Entry<String, Integer> s : skipped.entrySet()) {
                out.append(i++ == 0 ? "" : ",").append("\"").append(s.getKey()).append("\":").append(s.getValue());
            }
            out.append("},\"candidates\":[").append(String.join(",", candidates)).append("]}");
            System.out.println(out);
        }
    }

    /** The offset of the declaration's name: its first whole word after the type (or the declaration's start). */
    static int nameAt(String text, VariableTree v, CompilationUnitTree unit, SourcePositions pos) {
        long from = pos.getStartPosition(unit, v);
        if (v.getType() != null && pos.getEndPosition(unit, v.getType()) > from) from = pos.getEndPosition(unit, v.getType());
        long end = pos.getEndPosition(unit, v);
        if (from < 0) return -1;
        Matcher m = Pattern.compile("(?<![\\w$])" + Pattern.quote(v.getName().toString()) + "(?![\\w$])").matcher(text);
        if (!m.find((int) from)) return -1;
        return (end < 0 || m.start() < end) ? m.start() : -1;
    }
}
