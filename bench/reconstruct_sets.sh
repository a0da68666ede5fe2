# Sourced by bench/reconstruct_compare.sh and bench/reconstruct_seeds.sh: the images,
# ground truth (sfm_eval's options) and ground-truth intrinsics (`reconstruct --intrinsics`,
# empty where the set has none) of each multi-view set under $data
# (TIEPOINT_SHARED_DATA/multiview). The set "rendered" is the scene `tiepoint render-scene`
# draws (8 views of 640 x 480, known cameras), rendered on first use under $work (the
# caller's scratch folder) by $tp: no data needed.
rendered_scene() {
  local d=$work/rendered-scene
  [ -e "$d/scene_par.txt" ] || "$tp" render-scene -o "$d" --views 8 --width 640 --height 480 > /dev/null
  echo "$d"
}
set_images() {
  case $1 in
    temple) ls "$data"/middlebury/templeSparseRing/*.png ;;
    dino) ls "$data"/middlebury/dinoSparseRing/*.png ;;
    fountain) ls "$data"/strecha_fountain_p11/images/*.jpg ;;
    balbianello) ls "$data"/gtsam_balbianello/*.jpg ;;
    kitti) ls "$data"/kitti_odometry_00_excerpt/sequences/00/image_0/*.png ;;
    rendered) ls "$(rendered_scene)"/*.png ;;
  esac
}
set_gt() {
  case $1 in
    temple) echo "--gt-par $(ls "$data"/middlebury/templeSparseRing/*_par.txt)" ;;
    dino) echo "--gt-par $(ls "$data"/middlebury/dinoSparseRing/*_par.txt)" ;;
    fountain) echo "--gt-par $data/strecha_fountain_p11/fountain_par_DERIVED.txt" ;;
    balbianello) echo "--gt-bundler $data/gtsam_balbianello/Balbianello.out --names $(cd "$data"/gtsam_balbianello && ls *.jpg | paste -sd,)" ;;
    kitti) echo "--gt-kitti $data/kitti_odometry_00_excerpt/poses/00.txt" ;;
    rendered) echo "--gt-par $(rendered_scene)/scene_par.txt" ;;
  esac
}
set_intrinsics() {
  case $1 in
    temple) ls "$data"/middlebury/templeSparseRing/*_par.txt ;;
    dino) ls "$data"/middlebury/dinoSparseRing/*_par.txt ;;
    fountain) echo "$data/strecha_fountain_p11/fountain_par_DERIVED.txt" ;;
    rendered) echo "$(rendered_scene)/scene_par.txt" ;;
    *) echo "" ;;
  esac
}
